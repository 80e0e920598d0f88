"""When credits are issued: one strategy per kind of phase.

- `ClosedLoop` (concurrency phase): `concurrency` users, each sending the next turn when its
  previous one returned.
- `Paced` (poisson/gamma/constant and fixed_schedule phases): first turns at their arrival
  times (random arrivals at a rate, or trace timestamps), later turns of a conversation after
  the previous one returned.

A strategy runs until its phase's ledger stops issuing (budget spent, stopped, no workers) or
its arrivals run out; the timing-manager drains the phase afterwards.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Protocol

import anyio

from aiperf.config import ConcurrencyPhase, FixedSchedulePhase, GammaPhase, Phase, PoissonPhase, RatePhase
from aiperf.issuing.issuer import CreditIssuer
from aiperf.issuing.ledger import InFlight
from aiperf.issuing.ports import TurnTiming
from aiperf.issuing.schedule import RateMode, arrival_offsets_ns, fixed_offsets_ns


class Strategy(Protocol):
    """Issues the credits of one phase through `issuer`."""

    async def run(self, issuer: CreditIssuer) -> None: ...


def strategy_for(phase: Phase, *, seed: int | None) -> Strategy:
    """The strategy of `phase`; `seed` (None: fresh) fixes random arrivals."""
    if isinstance(phase, ConcurrencyPhase):
        return ClosedLoop(users=phase.concurrency)
    if isinstance(phase, FixedSchedulePhase):
        return Paced(fixed=True, arrivals=_trace_arrivals)
    assert isinstance(phase, RatePhase)
    return Paced(fixed=False, arrivals=RateArrivals(phase, seed))


class ClosedLoop:
    """`users` concurrent users walk the conversations in dataset order (one shared cursor)."""

    def __init__(self, *, users: int) -> None:
        self.users = users

    async def run(self, issuer: CreditIssuer) -> None:
        cursor = itertools.cycle(range(len(issuer.conversations)))
        async with anyio.create_task_group() as tg:
            for _ in range(self.users):
                tg.start_soon(self._user, issuer, cursor)

    @staticmethod
    async def _user(issuer: CreditIssuer, cursor: Iterator[int]) -> None:
        """Each turn goes to the worker of the conversation's previous turn, once that returned
        and the turn's delay passed."""
        ledger = issuer.ledger
        while ledger.may_issue():
            index = next(cursor)
            worker: str | None = None
            for turn, timing in enumerate(issuer.conversations.turns(index)):
                if turn and timing.delay_ms:
                    await issuer.sleep(timing.delay_ms / 1000)
                if not ledger.may_issue():
                    return
                entry = await issuer.issue(index, turn, prefer=worker)
                if entry is None:
                    return
                worker = entry.worker
                if not ledger.may_issue():
                    return  # the budget is spent: sending is complete, do not wait here
                await entry.done.wait()
                if entry.outcome == "lost":
                    break


class Arrivals(Protocol):
    """(offset ns from the phase start, conversation index) of each first turn, in send order,
    for `count` conversations with first-turn timestamps `stamps` (ms, None where absent)."""

    def __call__(self, count: int, stamps: list[float | None], /) -> Iterator[tuple[int, int]]: ...


def _trace_arrivals(count: int, stamps: list[float | None], /) -> Iterator[tuple[int, int]]:
    """Arrivals of a fixed-schedule phase: the trace timestamps (`UserError` when one is missing)."""
    return iter(fixed_offsets_ns(stamps))


class RateArrivals:
    """Arrivals of a rate phase (constant, poisson or gamma), cycling through the conversations.
    Deterministic for a seed."""

    def __init__(self, phase: RatePhase, seed: int | None) -> None:
        self._phase, self._seed = phase, seed

    def __call__(self, count: int, stamps: list[float | None], /) -> Iterator[tuple[int, int]]:
        phase = self._phase
        mode: RateMode = "poisson" if isinstance(phase, PoissonPhase) else "gamma" if isinstance(phase, GammaPhase) \
            else "constant"
        rng = random.Random(f"{self._seed}:arrivals" if self._seed is not None else None)
        smoothness = phase.smoothness if isinstance(phase, GammaPhase) else 1.0
        offsets = arrival_offsets_ns(rate=phase.rate, mode=mode, smoothness=smoothness, rng=rng)
        return zip(offsets, itertools.cycle(range(count)), strict=False)


class Paced:
    """First turns at their arrival times (sent `send_ahead_ns` early; the worker waits for the
    exact time); each later turn of a conversation in its own task, after the previous turn
    returned and then its delay (or, `fixed`, at its trace timestamp)."""

    def __init__(self, *, fixed: bool, arrivals: Arrivals) -> None:
        self.fixed, self._arrivals = fixed, arrivals

    async def run(self, issuer: CreditIssuer) -> None:
        ledger, conversations = issuer.ledger, issuer.conversations
        stamps = conversations.timestamps()
        t0 = issuer.clock() + issuer.send_ahead_ns
        async with anyio.create_task_group() as tg:
            for offset_ns, index in self._arrivals(len(conversations), stamps):
                if not ledger.may_issue():
                    return
                scheduled = t0 + offset_ns
                await issuer.sleep_until(scheduled - issuer.send_ahead_ns)
                if not ledger.may_issue():  # follow-up turns may have spent the budget meanwhile
                    return
                entry = await issuer.issue_slotted(index, 0, scheduled=scheduled)
                if entry is None:
                    return
                turns = conversations.turns(index)
                if len(turns) > 1:
                    tg.start_soon(self._follow_up, issuer, entry, turns, t0, stamps)

    async def _follow_up(self, issuer: CreditIssuer, entry: InFlight, turns: Sequence[TurnTiming],
                         t0: int, stamps: list[float | None]) -> None:
        ledger = issuer.ledger
        base_ms = min((t for t in stamps if t is not None), default=0.0)
        for turn in range(1, len(turns)):
            await entry.done.wait()
            if entry.outcome == "lost":
                return
            timing, scheduled = turns[turn], 0
            if self.fixed and timing.timestamp_ms is not None:
                scheduled = t0 + round((timing.timestamp_ms - base_ms) * 1_000_000)
                await issuer.sleep_until(scheduled - issuer.send_ahead_ns)
            elif timing.delay_ms:
                await issuer.sleep(timing.delay_ms / 1000)
            if not ledger.may_issue():
                return
            next_entry = await issuer.issue_slotted(entry.conversation, turn, scheduled=scheduled,
                                                    prefer=entry.worker)
            if next_entry is None or not ledger.may_issue():
                return
            entry = next_entry


__all__ = ["Arrivals", "ClosedLoop", "Paced", "RateArrivals", "Strategy", "strategy_for"]
