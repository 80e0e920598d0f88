"""When credits are issued: one strategy per kind of phase.

- `ClosedLoop` (concurrency phase): `concurrency` users, each sending the next turn when its
  previous one returned.
- `Paced` (poisson/gamma/constant and fixed_schedule phases): first turns at their arrival
  times (random arrivals at a rate, or trace timestamps), later turns of a conversation after
  the previous one returned.
- `UserCentric` (user_centric phases): users sharing a rate, each at its own fixed pace.

A strategy runs until its phase's ledger stops issuing (budget spent, stopped, no workers) or
its arrivals run out; the timing-manager drains the phase afterwards.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Iterator, Sequence
from typing import Protocol

import anyio
import anyio.abc

from aiperf.config import (
    ConcurrencyPhase,
    FixedSchedulePhase,
    GammaPhase,
    Phase,
    PoissonPhase,
    RatePhase,
    UserCentricPhase,
)
from aiperf.issuing.issuer import CreditIssuer
from aiperf.issuing.ledger import InFlight
from aiperf.issuing.ports import TurnTiming
from aiperf.issuing.schedule import NS_PER_S, RateMode, arrival_offsets_ns, fixed_offsets_ns, schedule_zero_ms


class Strategy(Protocol):
    """Issues the credits of one phase through `issuer`."""

    async def run(self, issuer: CreditIssuer) -> None: ...


def strategy_for(phase: Phase, *, seed: int | None) -> Strategy:
    """The strategy of `phase`; `seed` (None: fresh) fixes random arrivals."""
    ramp_s = phase.concurrency_ramp.duration if phase.concurrency_ramp is not None else None
    if isinstance(phase, ConcurrencyPhase):
        return ClosedLoop(users=phase.concurrency, ramp_s=ramp_s)
    if isinstance(phase, FixedSchedulePhase):
        window = {"start_ms": phase.start_offset, "end_ms": phase.end_offset}
        return Paced(fixed=True, arrivals=TraceArrivals(auto_offset=phase.auto_offset, **window),
                     auto_offset=phase.auto_offset, cap_ramp_s=ramp_s, **window)
    if isinstance(phase, UserCentricPhase):
        return UserCentric(users=phase.users, rate=phase.rate)
    assert isinstance(phase, RatePhase)
    return Paced(fixed=False, arrivals=RateArrivals(phase, seed), cap_ramp_s=ramp_s)


def ramp_steps_s(target: int, ramp_s: float) -> list[float]:
    """When a concurrency ramped from 1 to `target` over `ramp_s` seconds reaches 2, 3, ...,
    `target` (AIPerf's linear ramp: steps of 1, evenly spaced, the last at `ramp_s`)."""
    if target <= 1:
        return []
    return [ramp_s * (value - 1) / (target - 1) for value in range(2, target + 1)]


async def ramp_open(issuer: CreditIssuer, slots: anyio.Semaphore, ramp_s: float, ramp: anyio.CancelScope, *,
                    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Hold the cap `slots` at 1 (its other slots taken here), then give them back one at a
    time over `ramp_s` seconds (`ramp_steps_s`); all at once when `ramp` is cancelled (the
    phase stopped issuing) or this task is."""
    held = 0
    while slots.value > 1:
        slots.acquire_nowait()
        held += 1
    task_status.started()
    start = issuer.clock()
    try:
        with ramp:
            for at_s in ramp_steps_s(held + 1, ramp_s):
                await issuer.sleep_until(start + round(at_s * NS_PER_S))
                slots.release()
                held -= 1
    finally:
        for _ in range(held):
            slots.release()


class ClosedLoop:
    """`users` concurrent users walk the conversations in dataset order (one shared cursor);
    with `ramp_s`, the first starts at once and the others one by one over that many seconds
    (`ramp_steps_s`), until the budget is spent."""

    def __init__(self, *, users: int, ramp_s: float | None = None) -> None:
        self.users, self.ramp_s = users, ramp_s

    async def run(self, issuer: CreditIssuer) -> None:
        cursor = itertools.cycle(range(len(issuer.conversations)))
        ramp = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            if self.ramp_s is None:
                for _ in range(self.users):
                    tg.start_soon(self._user, issuer, cursor, ramp)
                return
            tg.start_soon(self._user, issuer, cursor, ramp)
            with ramp:
                start = issuer.clock()
                for at_s in ramp_steps_s(self.users, self.ramp_s):
                    await issuer.sleep_until(start + round(at_s * NS_PER_S))
                    if not issuer.ledger.may_issue():
                        break
                    tg.start_soon(self._user, issuer, cursor, ramp)

    @staticmethod
    async def _user(issuer: CreditIssuer, cursor: Iterator[int], ramp: anyio.CancelScope) -> None:
        """Each turn goes to the worker of the conversation's previous turn, once that returned
        and the turn's delay passed. The user who spends the budget ends the ramp."""
        try:
            await ClosedLoop._turns(issuer, cursor)
        finally:
            if not issuer.ledger.may_issue():
                ramp.cancel()

    @staticmethod
    async def _turns(issuer: CreditIssuer, cursor: Iterator[int]) -> None:
        ledger = issuer.ledger
        while ledger.start_session():
            index = next(cursor)
            worker: str | None = None
            url = 0
            for turn, timing in enumerate(issuer.conversations.turns(index)):
                if turn and timing.delay_ms:
                    await issuer.sleep(timing.delay_ms / 1000)
                if not ledger.may_issue():
                    return
                entry = await issuer.issue(index, turn, prefer=worker, url_index=url)
                if entry is None:
                    return
                worker, url = entry.worker, entry.url_index
                if not ledger.may_issue():
                    return  # the budget is spent: sending is complete, do not wait here
                await entry.done.wait()
                if entry.outcome == "lost":
                    break


class Arrivals(Protocol):
    """(offset ns from the phase start, conversation index) of each first turn, in send order,
    for `count` conversations with first-turn timestamps `stamps` (ms, None where absent)."""

    def __call__(self, count: int, stamps: list[float | None], /) -> Iterator[tuple[int, int]]: ...


class TraceArrivals:
    """Arrivals of a fixed-schedule phase: the trace timestamps in the window [`start_ms`,
    `end_ms`] (`UserError` when one is missing), relative to the earliest (`auto_offset`), to
    `start_ms`, or to 0 (`fixed_offsets_ns`)."""

    def __init__(self, *, auto_offset: bool, start_ms: float | None = None, end_ms: float | None = None) -> None:
        self._auto_offset, self._start_ms, self._end_ms = auto_offset, start_ms, end_ms

    def __call__(self, count: int, stamps: list[float | None], /) -> Iterator[tuple[int, int]]:
        return iter(fixed_offsets_ns(stamps, auto_offset=self._auto_offset, start_ms=self._start_ms,
                                     end_ms=self._end_ms))


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
        ramp_s = phase.rate_ramp.duration if phase.rate_ramp is not None else None
        offsets = arrival_offsets_ns(rate=phase.rate, mode=mode, smoothness=smoothness, rng=rng, ramp_s=ramp_s)
        return zip(offsets, itertools.cycle(range(count)), strict=False)


class Paced:
    """First turns at their arrival times (sent `send_ahead_ns` early; the worker waits for the
    exact time); each later turn of a conversation in its own task, after the previous turn
    returned and then its delay (or, `fixed`, at its trace timestamp, relative to the earliest
    with `auto_offset`)."""

    def __init__(self, *, fixed: bool, arrivals: Arrivals, auto_offset: bool = True,
                 cap_ramp_s: float | None = None, start_ms: float | None = None, end_ms: float | None = None) -> None:
        self.fixed, self._arrivals, self._auto_offset = fixed, arrivals, auto_offset
        self._start_ms, self._end_ms = start_ms, end_ms
        self._cap_ramp_s = cap_ramp_s

    async def run(self, issuer: CreditIssuer) -> None:
        ledger, conversations = issuer.ledger, issuer.conversations
        stamps = conversations.timestamps()
        t0 = issuer.clock() + issuer.send_ahead_ns
        async with anyio.create_task_group() as tg:
            ramp = anyio.CancelScope()
            if self._cap_ramp_s is not None and ledger.slots is not None:
                await tg.start(ramp_open, issuer, ledger.slots, self._cap_ramp_s, ramp)
            try:
                await self._arrive(issuer, tg, t0, stamps)
            finally:
                ramp.cancel()

    async def _arrive(self, issuer: CreditIssuer, tg: anyio.abc.TaskGroup, t0: int,
                      stamps: list[float | None]) -> None:
        ledger, conversations = issuer.ledger, issuer.conversations
        for offset_ns, index in self._arrivals(len(conversations), stamps):
            if not ledger.may_issue():
                return
            scheduled = t0 + offset_ns
            await issuer.sleep_until(scheduled - issuer.send_ahead_ns)
            if not ledger.start_session():  # follow-up turns may have spent the budget meanwhile
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
        base_ms = schedule_zero_ms(stamps, auto_offset=self._auto_offset, start_ms=self._start_ms, end_ms=self._end_ms)
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
                                                    prefer=entry.worker, url_index=entry.url_index)
            if next_entry is None or not ledger.may_issue():
                return
            entry = next_entry


def initial_users(users: int, lifetime: int) -> list[tuple[int, int | None]]:
    """(start order, turns to send; None: all of its conversation's) of the users a
    user-centric phase starts with, AIPerf 0.13's steady state: user i of `users` is
    (users - i) x `lifetime` / users gaps into a session of `lifetime` gaps (the average turns
    less one) and sends the turns it has left; those with none left are skipped, and one fresh
    user, sending all its turns, goes first. Orders are distinct (when `users` and `lifetime`
    share a factor, AIPerf's alternate spacing: the smallest step coprime with `users`)."""
    alternate = math.gcd(users, lifetime) > 1
    step = next((s for s in range(2, users) if math.gcd(users, s) == 1), 1) if alternate else 1
    out: list[tuple[int, int | None]] = []
    for i in range(users):
        age = (users - i) * lifetime
        to_send = lifetime - age // users
        if to_send <= 0:
            continue
        slot = (i * step) % users if alternate else age % users
        out.append((users - slot, to_send))
    out.append((0, None))
    return out


class UserCentric:
    """AIPerf's user-centric rate: `users` users share `rate` requests per second. Each user
    walks one conversation (dataset order, one shared cursor), its first turn at its start time
    and each later one `users / rate` seconds after the previous one's send time, or when the
    previous one returns if that is later (`max(return, previous + gap)`; the dataset's turn
    delays are not used). The users of `initial_users` start `1 / rate` apart in their order;
    a new user, sending all its conversation's turns, starts when a user's last turn is due
    (its start + turns x gap, whether or not it is done), until the budget is spent."""

    def __init__(self, *, users: int, rate: float) -> None:
        self.users, self.rate = users, rate

    async def run(self, issuer: CreditIssuer) -> None:
        ledger, conversations = issuer.ledger, issuer.conversations
        count = len(conversations)
        average = sum(len(conversations.turns(i)) for i in range(count)) / count
        stagger_ns, gap_ns = NS_PER_S / self.rate, self.users * NS_PER_S / self.rate
        cursor = itertools.cycle(range(count))
        t0 = issuer.clock() + issuer.send_ahead_ns
        due: list[int] = []
        async with anyio.create_task_group() as tg:
            def start(at_ns: int, max_turns: int | None) -> None:
                index = next(cursor)
                turns = len(conversations.turns(index))
                turns = turns if max_turns is None else min(turns, max_turns)
                tg.start_soon(self._user, issuer, index, turns, at_ns, round(gap_ns))
                heapq.heappush(due, at_ns + round(turns * gap_ns))

            for order, max_turns in initial_users(self.users, max(1, round(average) - 1)):
                start(t0 + round(order * stagger_ns), max_turns)
            while ledger.may_issue() and due:
                at_ns = heapq.heappop(due)
                await issuer.sleep_until(at_ns - issuer.send_ahead_ns)
                if not ledger.may_issue():
                    break
                start(at_ns, None)

    @staticmethod
    async def _user(issuer: CreditIssuer, index: int, turns: int, at_ns: int, gap_ns: int) -> None:
        ledger = issuer.ledger
        await issuer.sleep_until(at_ns - issuer.send_ahead_ns)
        if not ledger.start_session():
            return
        entry = await issuer.issue_slotted(index, 0, scheduled=at_ns)
        for turn in range(1, turns):
            if entry is None or not ledger.may_issue():
                return
            await entry.done.wait()
            if entry.outcome == "lost":
                return
            at_ns = max(issuer.clock(), at_ns + gap_ns)
            await issuer.sleep_until(at_ns - issuer.send_ahead_ns)
            if not ledger.may_issue():
                return
            entry = await issuer.issue_slotted(index, turn, scheduled=at_ns, prefer=entry.worker,
                                               url_index=entry.url_index)


__all__ = ["Arrivals", "ClosedLoop", "Paced", "RateArrivals", "Strategy", "TraceArrivals", "UserCentric",
           "initial_users", "ramp_open", "ramp_steps_s", "strategy_for"]
