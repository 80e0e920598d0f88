"""`CreditAuditor`: finds credits that will never come back because a frame was lost or could
not be decoded (the credit on its way to the worker, or its return on the way back).

Every `interval_s`, each worker holding a credit issued before the previous audit is sent a
`CreditAudit(seq)` after its credits (a DEALER receives in order). The worker answers
`HeldCredits(seq, held)` on the socket its returns travel on, after them. So when the answer
arrives, every credit issued to that worker before the audit was sent is either returned (and
settled), held (listed), or lost: it is declared lost, which bounds a run that would otherwise
wait for it forever. Workers that do not answer (older builds, stalled ones) are never judged
by this; the controller's liveness checks cover dead workers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import structlog

from aiperf.comms import PeerUnreachable
from aiperf.issuing.ledger import PhaseLedger
from aiperf.issuing.ports import Clock, CreditRouter, Sleep
from aiperf.issuing.workers import WorkerPool
from aiperf.messages import CreditAudit, HeldCredits

log = structlog.get_logger("aiperf.issuing")


class CreditAuditor:
    """Audits the workers holding the credits of `ledgers()` (see the module doc)."""

    def __init__(self, *, ledgers: Callable[[], Iterable[PhaseLedger]], pool: WorkerPool,
                 credits: CreditRouter, clock: Clock, sleep: Sleep, interval_s: float = 2.0) -> None:
        self._ledgers, self._pool, self._credits = ledgers, pool, credits
        self._clock, self._sleep, self._interval_s = clock, sleep, interval_s
        self._seq = itertools.count(1)
        self._sent: dict[tuple[str, int], int] = {}
        self._last_round_ns = 0

    async def run(self) -> None:
        """Audit every `interval_s` until cancelled."""
        while True:
            await self._sleep(self._interval_s)
            await self.audit_round()

    async def audit_round(self) -> None:
        """Send `CreditAudit` to every worker holding a credit issued before the previous round
        (a younger credit may simply be on its way)."""
        now, before = self._clock(), self._last_round_ns
        self._last_round_ns = now
        workers = {entry.worker for ledger in self._ledgers() for entry in ledger.in_flight.values()
                   if entry.issued_ns < before}
        for worker in sorted(workers):
            seq = next(self._seq)
            self._sent[(worker, seq)] = self._clock()
            try:
                await self._credits.send(worker.encode(), CreditAudit(seq=seq))
            except PeerUnreachable:
                self._sent.pop((worker, seq), None)  # a departed worker: liveness handles it

    def on_held(self, answer: HeldCredits) -> int:
        """Settle the credits of `answer.worker_id` issued before audit `answer.seq` that it
        neither holds nor returned: declared lost. Returns how many."""
        sent_ns = self._sent.pop((answer.worker_id, answer.seq), None)
        if sent_ns is None:
            return 0
        for key in [k for k in self._sent if k[0] == answer.worker_id and k[1] < answer.seq]:
            del self._sent[key]  # superseded audits
        lost = 0
        for ledger in self._ledgers():
            held = set(answer.held.get(ledger.phase, ()))
            stale = [e.num for e in ledger.in_flight.values()
                     if e.worker == answer.worker_id and e.issued_ns < sent_ns and e.num not in held]
            for num in stale:
                if ledger.declare_lost(num) is not None:
                    self._pool.release(answer.worker_id)
                    lost += 1
        if lost:
            log.warning("timing.credits_lost_in_transit", worker=answer.worker_id, lost=lost,
                        why="neither held by the worker nor returned (a frame lost or undecodable)")
        return lost


__all__ = ["CreditAuditor"]
