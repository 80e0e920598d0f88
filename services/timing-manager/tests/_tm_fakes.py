"""Fakes at the timing-manager's ports: a virtual clock, a credits router, returns, events,
an in-memory dataset and scriptable workers."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskStatus

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.profile_options import ProfileFlags
from aiperf.comms import PeerUnreachable
from aiperf.config import Benchmark
from aiperf.issuing.engine import TimingManager
from aiperf.issuing.ports import TurnTiming
from aiperf.messages import (
    CancelCredits,
    Credit,
    CreditAudit,
    CreditReturn,
    CreditReturnChannel,
    Event,
    FirstToken,
    HeldCredits,
    Phase,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    TimePing,
    WorkerConnected,
)

START_NS = 1_000_000_000_000


class VirtualClock:
    """Virtual time that jumps to the next sleeper's deadline whenever every task is blocked
    (run `drive` in the test's task group). Sleeps never take real time."""

    def __init__(self) -> None:
        self.now = START_NS
        self._sleepers: list[tuple[int, int, anyio.Event]] = []
        self._seq = itertools.count()
        self._new = anyio.Event()

    def __call__(self) -> int:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await anyio.sleep(0)
            return
        item = (self.now + max(1, round(seconds * 1e9)), next(self._seq), anyio.Event())
        heapq.heappush(self._sleepers, item)
        self._new.set()
        try:
            await item[2].wait()
        finally:
            if not item[2].is_set():
                self._sleepers.remove(item)
                heapq.heapify(self._sleepers)

    async def drive(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await _all_other_tasks_blocked()
            if not self._sleepers:
                self._new = anyio.Event()
                await self._new.wait()
                continue
            deadline = self._sleepers[0][0]
            self.now = max(self.now, deadline)
            while self._sleepers and self._sleepers[0][0] <= self.now:
                heapq.heappop(self._sleepers)[2].set()


async def _all_other_tasks_blocked() -> None:
    """Like `anyio.wait_all_tasks_blocked`, but re-checks at every loop turn instead of every
    0.1 s (virtual time would otherwise crawl). asyncio only."""
    me = asyncio.current_task()
    while True:
        await asyncio.sleep(0)
        for task in asyncio.all_tasks():
            waiter = task._fut_waiter  # type: ignore[attr-defined]
            if task is not me and (waiter is None or waiter.done()):
                break
        else:
            return


class FakeRouter:
    """The credits ROUTER: everything sent lands in `outbox` as (worker id, message)."""

    def __init__(self) -> None:
        self._out_tx, self.outbox = anyio.create_memory_object_stream[tuple[str, object]](10_000)
        self.pings_tx, self._pings_rx = anyio.create_memory_object_stream[tuple[bytes, TimePing]](100)
        self.unreachable: set[str] = set()

    async def send(self, peer: bytes, message: object) -> None:
        if peer.decode() in self.unreachable:
            raise PeerUnreachable(peer, "credits")
        await self._out_tx.send((peer.decode(), message))

    def send_nowait(self, peer: bytes, message: object) -> None:
        if peer.decode() in self.unreachable:
            raise PeerUnreachable(peer, "credits")
        self._out_tx.send_nowait((peer.decode(), message))  # anyio.WouldBlock when full

    async def broadcast(self, peers: Iterable[bytes], message: object) -> list[bytes]:
        skipped = []
        for peer in peers:
            try:
                await self.send(peer, message)
            except PeerUnreachable:
                skipped.append(peer)
        return skipped

    async def recv(self) -> tuple[bytes, TimePing]:
        return await self._pings_rx.receive()

    def close(self) -> None:
        for stream in (self._out_tx, self.outbox, self.pings_tx, self._pings_rx):
            stream.close()


class FakeReturns:
    def __init__(self) -> None:
        self.tx, self._rx = anyio.create_memory_object_stream[CreditReturnChannel](10_000)

    async def recv(self) -> CreditReturnChannel:
        return await self._rx.receive()

    def close(self) -> None:
        self.tx.close()
        self._rx.close()


class FakeEvents:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(self, event: Event) -> None:
        self.events.append(event)


class FakeConversations:
    """`turns[i]` are the turn timings of conversation `conv-i`."""

    def __init__(self, turns: Sequence[Sequence[TurnTiming]]) -> None:
        self._turns = [list(t) for t in turns]
        self.closed = False

    @classmethod
    def single_turn(cls, n: int, timestamps_ms: Sequence[float | None] | None = None) -> FakeConversations:
        stamps = list(timestamps_ms) if timestamps_ms is not None else [None] * n
        return cls([[TurnTiming(None, ts)] for ts in stamps])

    def __len__(self) -> int:
        return len(self._turns)

    def ids(self) -> list[str]:
        return [f"conv-{i}" for i in range(len(self._turns))]

    def timestamps(self) -> list[float | None]:
        return [t[0].timestamp_ms for t in self._turns]

    def turns(self, index: int) -> Sequence[TurnTiming]:
        return self._turns[index]

    def close(self) -> None:
        self.closed = True


Behaviour = Callable[[str, Credit], "float | None"]
"""Given (worker, credit): seconds (virtual) until it returns ok, or None to hold it until
`CancelCredits` (returned cancelled) or forever if the worker is `deaf`."""


@dataclass
class Seen:
    worker: str
    credit: Credit
    at_ns: int


@dataclass
class FakeWorkers:
    """Workers behind `FakeRouter`: return credits after a virtual delay (`behaviour`),
    record what they saw and the most credits ever in flight at once."""

    router: FakeRouter
    returns: FakeReturns
    clock: VirtualClock
    behaviour: Behaviour = field(default=lambda worker, credit: 0.0)
    first_token: Behaviour = field(default=lambda worker, credit: None)
    """Seconds (virtual) until a credit that asks for it (`report_first_token`) reports its first
    token, or None for never (it returns without one)."""
    deaf: set[str] = field(default_factory=set)
    fail_nums: set[int] = field(default_factory=set)
    lost_nums: set[int] = field(default_factory=set)
    """Credits that never arrive (a frame lost on the way)."""
    seen: list[Seen] = field(default_factory=list)
    cancels: list[tuple[str, CancelCredits]] = field(default_factory=list)
    in_flight: dict[tuple[str, int], tuple[str, Credit]] = field(default_factory=dict)
    max_in_flight: int = 0
    audits: int = 0

    async def connect(self, *worker_ids: str) -> None:
        for worker in worker_ids:
            await self.returns.tx.send(WorkerConnected(worker_id=worker))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            task_status.started()
            async for worker, message in self.router.outbox:
                match message:
                    case Credit() as credit if credit.num in self.lost_nums:
                        pass
                    case CreditAudit(seq=seq):
                        self.audits += 1
                        held: dict[Phase, list[int]] = {}
                        for holder, credit in self.in_flight.values():
                            if holder == worker:
                                held.setdefault(credit.phase, []).append(credit.num)
                        await self.returns.tx.send(HeldCredits(worker_id=worker, seq=seq, held=held))
                    case Credit() as credit:
                        self.seen.append(Seen(worker, credit, self.clock()))
                        self.in_flight[(credit.phase, credit.num)] = (worker, credit)
                        self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
                        delay = self.behaviour(worker, credit)
                        if delay is not None:
                            tg.start_soon(self._finish, worker, credit, delay)
                        first = self.first_token(worker, credit) if credit.report_first_token else None
                        if first is not None:
                            tg.start_soon(self._first_token, worker, credit, first)
                    case CancelCredits() as cancel:
                        self.cancels.append((worker, cancel))
                        if worker not in self.deaf:
                            for holder, credit in list(self.in_flight.values()):
                                if holder == worker and credit.phase == cancel.phase:
                                    await self._return(worker, credit, cancelled=True)

    async def _finish(self, worker: str, credit: Credit, delay: float) -> None:
        await self.clock.sleep(delay)
        if (credit.phase, credit.num) in self.in_flight:
            await self._return(worker, credit, ok=credit.num not in self.fail_nums)

    async def _first_token(self, worker: str, credit: Credit, delay: float) -> None:
        await self.clock.sleep(delay)
        if (credit.phase, credit.num) in self.in_flight:
            await self.returns.tx.send(FirstToken(worker_id=worker, phase=credit.phase, num=credit.num,
                                                  at_ns=self.clock()))

    async def _return(self, worker: str, credit: Credit, *, ok: bool = True, cancelled: bool = False) -> None:
        del self.in_flight[(credit.phase, credit.num)]
        await self.returns.tx.send(CreditReturn.of(credit, worker_id=worker, ok=ok and not cancelled,
                                                   cancelled=cancelled))

    def credits(self, phase: str = "profiling") -> list[Seen]:
        return [s for s in self.seen if s.credit.phase == phase]


@dataclass
class Rig:
    """A TimingManager wired to fakes, with running virtual clock and workers."""

    tm: TimingManager
    clock: VirtualClock
    router: FakeRouter
    returns: FakeReturns
    events: FakeEvents
    workers: FakeWorkers
    conversations: FakeConversations

    async def configure(self) -> None:
        assert await self.tm.handle(ProfileConfigure(request_id="c", dataset_dir="/fake")) is None

    async def start(self) -> dict[str, Any]:
        """The `ProfileFinished` accounting as plain data."""
        reply = await self.tm.handle(ProfileStart(request_id="s"))
        assert isinstance(reply, ProfileFinished)
        accounting: dict[str, Any] = msgspec.to_builtins(reply.accounting)
        return accounting

    def close(self) -> None:
        self.router.close()
        self.returns.close()


OPEN_RIGS: list[Rig] = []
"""Rigs made by the running test; the conftest closes their streams afterwards."""


def make_rig(benchmark: Benchmark, *, conversations: FakeConversations | None = None,
             workers: int = 1, behaviour: Behaviour | None = None, cancel_drain_s: float = 5.0,
             registration_timeout_s: float = 5.0, audit_interval_s: float | None = None, urls: int = 1) -> Rig:
    clock, router, returns, events = VirtualClock(), FakeRouter(), FakeReturns(), FakeEvents()
    convs = conversations if conversations is not None else FakeConversations.single_turn(5)
    tm = TimingManager(service_id="timing-manager", phases=benchmark.phases, seed=benchmark.random_seed,
                       expected_workers=workers,
                       registration_timeout_s=registration_timeout_s, credits=router, returns=returns,
                       events=events, open_conversations=lambda _: convs, clock=clock,
                       wall_clock=lambda: 42, sleep=clock.sleep, cancel_drain_s=cancel_drain_s,
                       audit_interval_s=audit_interval_s, urls=urls)
    fake_workers = FakeWorkers(router, returns, clock)
    if behaviour is not None:
        fake_workers.behaviour = behaviour
    rig = Rig(tm, clock, router, returns, events, fake_workers, convs)
    OPEN_RIGS.append(rig)
    return rig


def profile(**flags: Any) -> Benchmark:
    """The benchmark `aiperf profile -m m` with these flags runs (a fixed schedule reads a trace)."""
    if flags.get("fixed_schedule"):
        flags.setdefault("input_file", "trace.jsonl")
    return build_benchmark(ProfileFlags(model=["m"], **flags)).benchmark


@asynccontextmanager
async def running(rig: Rig, *worker_ids: str) -> AsyncIterator[Rig]:
    """Run the clock, the TimingManager and the fake workers; connect `worker_ids`
    (default: w0..w(n-1) for the rig's expected count) and configure."""
    async with anyio.create_task_group() as tg:
        await tg.start(rig.clock.drive)
        await tg.start(rig.tm.run)
        await tg.start(rig.workers.run)
        await rig.workers.connect(*(worker_ids or tuple(f"w{i}" for i in range(rig.tm._expected))))
        with anyio.fail_after(10):
            await rig.configure()
        yield rig
        tg.cancel_scope.cancel()
