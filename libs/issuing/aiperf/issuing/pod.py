"""`PodIssuer`: a worker pod's side of a sharded run. It runs the issuing engine
(`aiperf.issuing.engine.TimingManager`) for its pod's slice of each phase against the pod's own
workers and tells the controller (`aiperf.issuing.coordinator.PodCoordinator`) only counters:
a `PodReport` every `report_interval_s` while a phase runs and a final one when its share is
settled. Messages: `aiperf.messages.pods`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from aiperf.config import FixedSchedulePhase, Phase
from aiperf.issuing.engine import TimingManager
from aiperf.issuing.ledger import PhaseLedger
from aiperf.issuing.ports import Conversations, Sleep, TurnTiming
from aiperf.issuing.schedule import fixed_offsets_ns, schedule_zero_ms
from aiperf.issuing.slices import PhaseSlice, decode_slice
from aiperf.messages import (
    PhaseAccounting,
    PodCancel,
    PodCounts,
    PodDownstream,
    PodHello,
    PodPhaseStart,
    PodReport,
)

log = structlog.get_logger("aiperf.issuing.pods")


class CoordinatorLink(Protocol):
    """The pod's `pods` DEALER (`aiperf.comms.DealerSocket`, identity = the pod id)."""

    async def send(self, message: PodHello | PodReport) -> None: ...

    async def recv(self) -> PodDownstream: ...


class _ScheduleView:
    """Some conversations of a dataset, their trace times shifted by `-zero_ms` (a
    `Conversations`; closing it leaves the dataset open)."""

    def __init__(self, whole: Conversations, indices: Sequence[int], zero_ms: float) -> None:
        self._whole, self._indices, self._zero = whole, list(indices), zero_ms
        ids, stamps = whole.ids(), whole.timestamps()
        self._ids = [ids[i] for i in self._indices]
        self._stamps = [None if stamps[i] is None else stamps[i] - zero_ms for i in self._indices]  # type: ignore[operator]

    def __len__(self) -> int:
        return len(self._indices)

    def ids(self) -> list[str]:
        return self._ids

    def timestamps(self) -> list[float | None]:
        return self._stamps

    def turns(self, index: int) -> Sequence[TurnTiming]:
        return [TurnTiming(t.delay_ms, None if t.timestamp_ms is None else t.timestamp_ms - self._zero)
                for t in self._whole.turns(self._indices[index])]

    def close(self) -> None:
        pass


def slice_schedule(conversations: Conversations, piece: PhaseSlice) -> tuple[FixedSchedulePhase, Conversations]:
    """A fixed-schedule slice made runnable: the pod's entries (every `entry_stride`-th of the
    whole schedule's send order, from `entry_offset`) with their times relative to the whole
    schedule's zero, and the phase that replays them at those times (no window, no offset: the
    view applied both). The pods' sends together are the whole schedule, at its times."""
    phase = piece.phase
    assert isinstance(phase, FixedSchedulePhase)
    stamps = conversations.timestamps()
    window = {"start_ms": phase.start_offset, "end_ms": phase.end_offset}
    order = fixed_offsets_ns(stamps, auto_offset=phase.auto_offset, **window)
    mine = [index for k, (_offset, index) in enumerate(order) if k % piece.entry_stride == piece.entry_offset]
    zero = schedule_zero_ms(stamps, auto_offset=phase.auto_offset, **window)
    own = msgspec.structs.replace(phase, auto_offset=False, start_offset=None, end_offset=None)
    return own, _ScheduleView(conversations, mine, zero)


def counts_of(ledger: PhaseLedger) -> PodCounts:
    """A ledger's counters as a pod reports them."""
    return PodCounts(issued=ledger.issued, ok=ledger.ok, failed=ledger.failed, cancelled=ledger.cancelled,
                     lost=ledger.lost, in_flight=len(ledger.in_flight), sent=ledger.sent)


def counts_of_accounting(accounting: PhaseAccounting) -> PodCounts:
    """A settled phase's accounting as the pod's final counters (nothing in flight)."""
    return PodCounts(issued=accounting.issued, ok=accounting.ok, failed=accounting.failed,
                     cancelled=accounting.cancelled, lost=accounting.lost, in_flight=0, sent=accounting.sent)


class PodIssuer:
    """Runs the slices the controller hands this pod through `engine` (configured for the pod's
    workers: its `expected_workers` are the pod's) and reports their counters over `link`.

    `run(dataset_dir)` configures the engine (waits for the pod's workers), says `PodHello`,
    then obeys the controller until cancelled: a `PodPhaseStart` runs that slice (one at a
    time, in order) with a `PodReport` every `report_interval_s` and a final one; a pod with
    nothing to do in a phase reports a zero total at once. `PodCancel` cancels the engine's
    run (what is in flight is cancelled; the final report follows). `accountings` keeps each
    phase's engine accounting by phase index."""

    def __init__(self, *, pod_id: str, engine: TimingManager, link: CoordinatorLink,
                 report_interval_s: float = 1.0, sleep: Sleep = anyio.sleep) -> None:
        self.pod_id, self._engine, self._link = pod_id, engine, link
        self._report_interval_s, self._sleep = report_interval_s, sleep
        self.accountings: dict[int, PhaseAccounting] = {}
        self._seq = 0

    async def run(self, dataset_dir: str, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the engine and the controller until cancelled; ready once registered."""
        send, receive = anyio.create_memory_object_stream[PodPhaseStart](max_buffer_size=64)
        async with anyio.create_task_group() as tg:
            await tg.start(self._engine.run)
            workers = await self._engine.configure(dataset_dir)
            await self._link.send(PodHello(pod_id=self.pod_id, workers=workers))
            log.info("pods.registered", pod=self.pod_id, workers=workers)
            tg.start_soon(self._run_phases, receive)
            task_status.started()
            async with send:
                while True:
                    message = await self._link.recv()
                    match message:
                        case PodPhaseStart():
                            await send.send(message)
                        case PodCancel(reason=reason):
                            self._engine.cancel(reason or "PodCancel")

    async def _run_phases(self, starts: anyio.abc.ObjectReceiveStream[PodPhaseStart]) -> None:
        async with starts:
            async for start in starts:
                await self.run_slice(start.phase_index, decode_slice(start.slice))

    async def run_slice(self, index: int, piece: PhaseSlice) -> PodCounts:
        """Run this pod's `piece` of phase `index`, reporting as it goes; returns (and has
        sent, `final`) its total."""
        self._seq = 0
        phase: Phase | None = piece.phase
        conversations = self._engine.conversations
        if phase is not None and isinstance(phase, FixedSchedulePhase) and conversations is not None:
            phase, conversations = slice_schedule(conversations, piece)
            if not len(conversations):
                phase = None
        if phase is None:
            total = PodCounts()
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._report_while_running, index)
                if piece.offset_s > 0:
                    await self._sleep(piece.offset_s)
                accounting = await self._engine.run_phase(phase, conversations=conversations, seed=piece.seed)
                tg.cancel_scope.cancel()
            self.accountings[index] = accounting
            total = counts_of_accounting(accounting)
        await self._report(index, total, final=True)
        return total

    async def _report_while_running(self, index: int) -> None:
        while True:
            await self._sleep(self._report_interval_s)
            ledger = self._engine.current
            if ledger is not None:
                await self._report(index, counts_of(ledger), final=False)

    async def _report(self, index: int, counts: PodCounts, *, final: bool) -> None:
        self._seq += 1
        await self._link.send(PodReport(pod_id=self.pod_id, phase_index=index, seq=self._seq, counts=counts,
                                        final=final))


__all__ = ["CoordinatorLink", "PodIssuer", "counts_of", "counts_of_accounting", "slice_schedule"]
