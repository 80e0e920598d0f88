"""Per-phase bookkeeping: every credit issued, where it is, and how it ended."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

import anyio

from aiperf.issuing.schedule import percentile
from aiperf.messages import CreditReturn, Phase, PhaseAccounting

Outcome = Literal["", "ok", "failed", "cancelled", "lost"]


@dataclass(eq=False, kw_only=True)
class InFlight:
    """One issued credit not yet settled. `done` is set when it returns or is declared lost;
    `outcome` then says which. `holds_prefill`: it holds a prefill slot (until its first token)."""

    num: int
    worker: str
    conversation: int
    turn: int
    holds_slot: bool
    holds_prefill: bool = False
    url_index: int = 0
    issued_ns: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: Outcome = ""


class PhaseLedger:
    """Counters and in-flight credits of one phase.

    Invariants once the phase is over: `issued == ok + failed + cancelled + lost` and
    `returned + lost == issued`. `drained` is set when sending is complete and nothing is
    in flight. `stop(reason)` ends issuing (first reason wins). With a session budget
    (`sessions`) the strategies claim each conversation they start (`start_session`). `slots` (a concurrency cap) and
    `prefill` (a prefill concurrency cap: requests waiting for their first token) are None
    without a cap; a credit's slots are released when it settles, its prefill slot earlier
    when its first token arrives (`first_token`).
    """

    def __init__(self, phase: Phase, *, count: int | None, concurrency_cap: int | None,
                 cancel_rate_pct: float = 0.0, cancel_delay_ns: int = 0, seed: int | None = None,
                 prefill_cap: int | None = None, sessions: int | None = None) -> None:
        self.phase = phase
        self.count = count
        self.sessions, self.sessions_started = sessions, 0
        self.issued = self.returned = self.sent = 0
        self.ok = self.failed = self.cancelled = self.lost = 0
        self.start_ns = self.end_ns = self.start_wall_ns = self.end_wall_ns = 0
        self.stopped_reason = ""
        self.sending_done = False
        self.in_flight: dict[int, InFlight] = {}
        self.lags_ns: list[int] = []
        self.drained = anyio.Event()
        self.slots = anyio.Semaphore(concurrency_cap) if concurrency_cap else None
        self.prefill = anyio.Semaphore(prefill_cap) if prefill_cap else None
        self.first_tokens = 0
        self.issuing = anyio.CancelScope()
        self._cancel_rate = cancel_rate_pct
        self.cancel_delay_ns = cancel_delay_ns
        self._cancel_rng = random.Random(f"{seed}:cancel" if seed is not None else None)

    def may_issue(self) -> bool:
        """True while issuing goes on and the credit budget is not used up."""
        return not self.stopped_reason and (self.count is None or self.issued < self.count)

    def start_session(self) -> bool:
        """Claim the start of a new conversation: False (nothing claimed) when issuing ended or
        the phase's session budget (`sessions`) is spent; a started one's later turns only
        need `may_issue`."""
        if not self.may_issue() or (self.sessions is not None and self.sessions_started >= self.sessions):
            return False
        self.sessions_started += 1
        return True

    def stop(self, reason: str) -> None:
        """End issuing now (cancels the issuing scope); the first reason is kept."""
        if not self.stopped_reason:
            self.stopped_reason = reason
        self.issuing.cancel()

    def should_cancel(self) -> bool:
        """Draw whether the next credit asks for request cancellation (seeded)."""
        return self._cancel_rate > 0 and self._cancel_rng.random() * 100 < self._cancel_rate

    def open(self, *, worker: str, conversation: int, turn: int, holds_slot: bool,
             issued_ns: int = 0, holds_prefill: bool = False, url_index: int = 0) -> InFlight:
        """Record a new credit (numbered in issue order) as in flight at `worker` since `issued_ns`."""
        entry = InFlight(num=self.issued, worker=worker, conversation=conversation, turn=turn,
                         holds_slot=holds_slot, holds_prefill=holds_prefill, url_index=url_index,
                         issued_ns=issued_ns)
        self.issued += 1
        self.in_flight[entry.num] = entry
        return entry

    def settle(self, ret: CreditReturn) -> InFlight | None:
        """Count a return; None (and nothing counted) for an unknown or settled credit."""
        entry = self.in_flight.pop(ret.num, None)
        if entry is None:
            return None
        self.returned += 1
        self.sent += ret.sent
        if ret.cancelled:
            self.cancelled += 1
            entry.outcome = "cancelled"
        elif ret.ok:
            self.ok += 1
            entry.outcome = "ok"
        else:
            self.failed += 1
            entry.outcome = "failed"
        self._close(entry)
        return entry

    def first_token(self, num: int) -> bool:
        """Credit `num`'s first token arrived: give back its prefill slot. False (nothing
        done) for a credit not in flight or holding none."""
        entry = self.in_flight.get(num)
        if entry is None or not entry.holds_prefill:
            return False
        entry.holds_prefill = False
        self.first_tokens += 1
        assert self.prefill is not None
        self.prefill.release()
        return True

    def declare_lost(self, num: int) -> InFlight | None:
        """Count credit `num` as lost (its worker died); None if not in flight."""
        entry = self.in_flight.pop(num, None)
        if entry is None:
            return None
        self.lost += 1
        entry.outcome = "lost"
        self._close(entry)
        return entry

    def finish_sending(self) -> None:
        """No more credits will be issued in this phase."""
        self.sending_done = True
        self._check_drained()

    def _close(self, entry: InFlight) -> None:
        if entry.holds_slot and self.slots is not None:
            self.slots.release()
        if entry.holds_prefill and self.prefill is not None:
            entry.holds_prefill = False
            self.prefill.release()
        entry.done.set()
        self._check_drained()

    def _check_drained(self) -> None:
        if self.sending_done and not self.in_flight:
            self.drained.set()

    def accounting(self) -> PhaseAccounting:
        """The phase's accounting; `stopped_reason` is kept only when issuing ended early
        (cancelled, no workers left), not for the plan's own stops (count, duration)."""
        lags = sorted(self.lags_ns)
        early = self.stopped_reason not in ("", "count", "duration", "schedule")
        return PhaseAccounting(
            issued=self.issued, returned=self.returned, sent=self.sent, ok=self.ok, failed=self.failed,
            cancelled=self.cancelled, lost=self.lost, start_ns=self.start_ns, end_ns=self.end_ns,
            start_wall_ns=self.start_wall_ns, end_wall_ns=self.end_wall_ns,
            schedule_lag_p50_ns=percentile(lags, 50), schedule_lag_p99_ns=percentile(lags, 99),
            stopped_reason=self.stopped_reason if early else "")
