"""`CreditIssuer`: numbers, records and sends the credits of one phase. The issuing strategies
(`aiperf.issuing.strategies`) decide *when*; this decides *where* and keeps the books."""

from __future__ import annotations

import anyio
import structlog

from aiperf.comms import PeerUnreachable
from aiperf.issuing.ledger import InFlight, PhaseLedger
from aiperf.issuing.ports import Clock, Conversations, CreditRouter, Sleep
from aiperf.issuing.schedule import NS_PER_S
from aiperf.issuing.workers import WorkerPool
from aiperf.messages import Credit

log = structlog.get_logger("aiperf.issuing")

NO_WORKERS = "no workers left"


class CreditIssuer:
    """Sends credits of `ledger`'s phase to the workers of `pool`.

    Credits scheduled for a time (`scheduled` ns, the timing-manager's clock) may be sent
    `send_ahead_ns` early: the worker waits for the exact time itself. With `urls` endpoint
    URLs, each conversation's first turn goes to the next URL in turn (AIPerf's round robin,
    per phase) and its later turns to the same one (the caller passes `url_index` on)."""

    def __init__(self, *, ledger: PhaseLedger, pool: WorkerPool, credits: CreditRouter,
                 conversations: Conversations, clock: Clock, sleep: Sleep, send_ahead_ns: int,
                 tick_ns: int = 0, urls: int = 1) -> None:
        self.ledger, self.conversations = ledger, conversations
        self._pool, self._credits = pool, credits
        self.clock, self._sleep = clock, sleep
        self.send_ahead_ns, self._tick_ns = send_ahead_ns, tick_ns
        self._ids = conversations.ids()
        self._urls, self._next_url = urls, 0

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (cancellable)."""
        await self._sleep(seconds)

    async def sleep_until(self, deadline_ns: int) -> None:
        """Sleep until `deadline_ns`; with `tick_ns` > 0 in steps of at most `tick_ns` (keeps
        the loop awake; an experiment against oversleeping on a CPU-starved host, not shown
        to help on the 2-core dev box)."""
        while (delay := deadline_ns - self.clock()) > 0:
            await self._sleep((min(delay, self._tick_ns) if self._tick_ns > 0 else delay) / NS_PER_S)

    async def issue_slotted(self, index: int, turn: int, *, scheduled: int,
                            prefer: str | None = None, url_index: int = 0) -> InFlight | None:
        """`issue` after waiting for a free slot when the phase has a concurrency cap."""
        slots = self.ledger.slots
        if slots is None:
            return await self.issue(index, turn, prefer=prefer, scheduled=scheduled, url_index=url_index)
        await slots.acquire()
        if not self.ledger.may_issue():
            slots.release()
            return None
        return await self.issue(index, turn, prefer=prefer, scheduled=scheduled, holds_slot=True,
                                url_index=url_index)

    def _url_for(self, turn: int, url_index: int) -> int:
        """The URL of a credit: the next in turn for a first turn, else the conversation's."""
        if self._urls <= 1:
            return 0
        if turn:
            return url_index
        chosen, self._next_url = self._next_url, (self._next_url + 1) % self._urls
        return chosen

    async def issue(self, index: int, turn: int, *, prefer: str | None, scheduled: int = 0,
                    holds_slot: bool = False, url_index: int = 0) -> InFlight | None:
        """Number, record and send one credit for turn `turn` of conversation `index` to `prefer`
        (if still connected) or the least-loaded worker; None when issuing ended meanwhile, or
        (and the phase stopped) when no worker is left. With a prefill cap the credit first
        waits for a prefill slot and asks its worker to report its first token. A worker found
        unreachable leaves the pool and the same credit goes to another one. A slot held by the
        caller (`holds_slot`) is released whenever None is returned."""
        ledger, pool = self.ledger, self._pool
        prefill = ledger.prefill
        if prefill is not None:
            try:
                await prefill.acquire()
            except BaseException:
                if holds_slot and ledger.slots is not None:
                    ledger.slots.release()
                raise
            if not ledger.may_issue():
                prefill.release()
                if holds_slot and ledger.slots is not None:
                    ledger.slots.release()
                return None
        worker = pool.pick(prefer)
        if worker is None:
            if holds_slot and ledger.slots is not None:
                ledger.slots.release()
            if prefill is not None:
                prefill.release()
            ledger.stop(NO_WORKERS)
            return None
        entry = ledger.open(worker=worker, conversation=index, turn=turn, holds_slot=holds_slot,
                            issued_ns=self.clock(), holds_prefill=prefill is not None,
                            url_index=self._url_for(turn, url_index))
        pool.charge(worker)
        should_cancel = ledger.should_cancel()
        while True:
            now = self.clock()
            credit = Credit(phase=ledger.phase, num=entry.num, conversation_id=self._ids[index],
                            turn_index=turn, issued_at_ns=now, scheduled_at_ns=scheduled,
                            should_cancel=should_cancel,
                            cancel_after_ns=ledger.cancel_delay_ns if should_cancel else 0,
                            report_first_token=prefill is not None, url_index=entry.url_index)
            peer = entry.worker.encode()
            try:
                try:
                    self._credits.send_nowait(peer, credit)
                except anyio.WouldBlock:  # the worker's queue is full: wait, but a credit is
                    with anyio.CancelScope(shield=True):  # either sent or given back, never half
                        await self._credits.send(peer, credit)
            except PeerUnreachable:
                log.warning("timing.worker_unreachable", worker=entry.worker, num=entry.num)
                pool.remove(entry.worker)
                replacement = pool.pick()
                if replacement is None:
                    ledger.declare_lost(entry.num)  # releases its slot
                    ledger.stop(NO_WORKERS)
                    return None
                entry.worker = replacement
                pool.charge(replacement)
                continue
            break
        if scheduled:
            ledger.lags_ns.append(now - scheduled)
        return entry
