"""`ShardedTimingManager`: the timing-manager's control commands over the real `PodCoordinator`
and a real ROUTER (IPC) with simulated pods on DEALERs. The system-controller gets what the
per-request engine gives it: `ProfileFinished` with the run's accounting and each phase's
events."""

from __future__ import annotations

import anyio
import pytest
import zmq.asyncio

from aiperf.config import ConcurrencyPhase, ConstantPhase
from aiperf.issuing.coordinator import PodCoordinator
from aiperf.issuing.pod import lag_histogram
from aiperf.issuing.sharded import ShardedTimingManager
from aiperf.issuing.slices import decode_slice
from aiperf.messages import (
    CreditsLost,
    Event,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    PodCancel,
    PodCounts,
    PodHello,
    PodPhaseStart,
    PodReport,
    PodWorkerLost,
    PrepareGroup,
    ProfileCancel,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    WorkerLost,
)
from aiperf.runtime import GiveUp, UnknownCommand
from tests._pods import dealer, router

pytestmark = pytest.mark.anyio

PLAN = [ConcurrencyPhase(name="warmup", concurrency=2, requests=5),
        ConstantPhase(name="profiling", rate=500.0, requests=11)]


LATE_NS = {"g0": 40_000, "g1": 40_000, "g2": 3_000_000}
"""How late each simulated pod issued its profiling credits (4 + 4 + 3 of the 11)."""


class Events:
    """An event sink that keeps what was published."""

    def __init__(self) -> None:
        self.published: list[Event] = []

    async def publish(self, event: Event) -> None:
        self.published.append(event)


async def pod(ctx: zmq.asyncio.Context, ipc_dir: str, pod_id: str, told: list[tuple[str, object]], *,
              task_status: anyio.abc.TaskStatus[None]) -> None:
    """A pod that settles each share at once (one failure when it has any) and notes what else
    it is told."""
    async with dealer(ctx, ipc_dir, pod_id) as link:
        await link.send(PodHello(pod_id=pod_id, workers=2))
        task_status.started()
        seq = 0
        while True:
            message = await link.recv()
            if not isinstance(message, PodPhaseStart):
                told.append((pod_id, message))
                continue
            share = decode_slice(message.slice).requests or 0
            lags = lag_histogram([LATE_NS[pod_id]] * share if message.phase_index == 1 else [])
            seq += 1
            await link.send(PodReport(pod_id=pod_id, phase_index=message.phase_index, seq=seq, final=True,
                                      counts=PodCounts(issued=share, ok=max(share - 1, 0), failed=min(share, 1),
                                                       sent=share), lag_counts=lags.late, early_counts=lags.early,
                                      lag_max_ns=lags.max_ns))


async def test_the_commands_run_the_plan_through_the_pods(ipc_dir: str) -> None:
    ctx, events, told = zmq.asyncio.Context(), Events(), []
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            tm = ShardedTimingManager(service_id="timing-manager", coordinator=PodCoordinator(
                router=sock, phases=PLAN, seed=3, expected_pods=3, registration_timeout_s=10, events=events))
            await tg.start(tm.run)
            with anyio.fail_after(20):
                with pytest.raises(GiveUp, match="before ProfileConfigure"):
                    await tm.handle(ProfileStart(request_id="s0"))
                for i in range(3):
                    await tg.start(pod, ctx, ipc_dir, f"g{i}", told)
                assert await tm.handle(ProfileConfigure(request_id="c", dataset_dir="/unused")) is None
                finished = await tm.handle(ProfileStart(request_id="s"))
                lost = await tm.handle(WorkerLost(request_id="l", worker_id="worker-g1-0"))
                while len(told) < 3:
                    await anyio.sleep(0.01)
                with pytest.raises(GiveUp, match="starts once"):
                    await tm.handle(ProfileStart(request_id="s2"))
                with pytest.raises(UnknownCommand):
                    await tm.handle(PrepareGroup(request_id="p", dataset_dir="/unused"))
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    assert isinstance(finished, ProfileFinished) and not finished.accounting.cancelled
    phases = finished.accounting.phases
    assert [str(p) for p in phases] == ["warmup", "profiling"]
    for tag, plan, active in zip(phases, PLAN, (2, 3), strict=True):  # warmup: concurrency 2, 2 pods
        book = phases[tag]
        assert book.issued == book.sent == plan.requests and book.returned == plan.requests
        assert book.failed == active and book.ok == plan.requests - active and book.lost == 0
        assert book.end_ns >= book.start_ns > 0
    assert phases[PLAN[0].role].schedule_lag_p99_ns == 0  # a closed loop schedules nothing  # type: ignore[index]
    profiling = phases[PLAN[1].role]  # type: ignore[index]
    assert 40_000 <= profiling.schedule_lag_p50_ns <= 40_000 * 1.19  # the bucket's upper bound
    assert profiling.schedule_lag_p99_ns == 3_000_000  # capped by the largest lag
    kinds = [(type(e).__name__, str(e.phase)) for e in events.published]  # type: ignore[attr-defined]
    assert kinds == [("PhaseStarted", "warmup"), ("PhaseSendingComplete", "warmup"), ("PhaseComplete", "warmup"),
                     ("PhaseStarted", "profiling"), ("PhaseSendingComplete", "profiling"),
                     ("PhaseComplete", "profiling")]
    started = [e for e in events.published if isinstance(e, PhaseStarted)]
    assert [e.expected_credits for e in started] == [5, 11]
    complete = [e for e in events.published if isinstance(e, PhaseComplete)]
    assert [(e.issued, e.returned, e.lost) for e in complete] == [(5, 5, 0), (11, 11, 0)]
    assert [e.issued for e in events.published if isinstance(e, PhaseSendingComplete)] == [5, 11]
    assert lost == CreditsLost(lost=0)
    assert sorted(p for p, _ in told) == ["g0", "g1", "g2"]
    assert all(m == PodWorkerLost(worker_id="worker-g1-0") for _, m in told)


def test_lag_histograms_add_up_to_the_phases_percentiles() -> None:
    from aiperf.issuing.coordinator import PodPhaseTotals
    from aiperf.messages import Phase

    assert lag_histogram([]) == ([], [], 0)
    one = lag_histogram([-5, 0, 20_000, 20_000, 1_000_000])
    assert (sum(one.late), sum(one.early), one.max_ns) == (3, 2, 1_000_000)
    book = PodPhaseTotals(index=0, phase=Phase.PROFILING, pods=["a", "b"])
    assert book.lag_percentile_ns(50) == 0  # nothing scheduled
    book.add_lags(*one)
    book.add_lags(*lag_histogram([-2_000_000] * 5))  # sent ahead, as the engine does
    assert -2_000_000 <= book.lag_percentile_ns(50) <= -2_000_000 / 1.19  # 5 of 10 that early
    assert book.lag_percentile_ns(70) == 0  # -5 and 0: within the first bucket
    assert 20_000 <= book.lag_percentile_ns(90) <= 20_000 * 1.19
    assert book.lag_percentile_ns(99) == 1_000_000
    early = PodPhaseTotals(index=0, phase=Phase.PROFILING, pods=["a"])
    early.add_lags(*lag_histogram([-1_500_000] * 3))
    assert early.lag_percentile_ns(50) == early.lag_percentile_ns(99) == -1_500_000  # capped by the largest


async def test_a_cancel_before_the_start_issues_nothing(ipc_dir: str) -> None:
    ctx, told = zmq.asyncio.Context(), []
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            tm = ShardedTimingManager(service_id="timing-manager", coordinator=PodCoordinator(
                router=sock, phases=PLAN, seed=3, expected_pods=1, registration_timeout_s=10))
            await tg.start(tm.run)
            with anyio.fail_after(20):
                await tg.start(pod, ctx, ipc_dir, "g0", told)
                await tm.handle(ProfileConfigure(request_id="c", dataset_dir="/unused"))
                await tm.handle(ProfileCancel(request_id="x", reason="cancelled by user"))
                finished = await tm.handle(ProfileStart(request_id="s"))
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    assert isinstance(finished, ProfileFinished)
    assert finished.accounting.cancelled and finished.accounting.phases == {}
    assert finished.accounting.stopped_reason == "cancelled by user"
    assert not [m for _, m in told if isinstance(m, PodCancel)]  # no phase ran, nothing to cancel


async def test_missing_pods_fail_the_configure(ipc_dir: str) -> None:
    ctx = zmq.asyncio.Context()
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            tm = ShardedTimingManager(service_id="timing-manager", coordinator=PodCoordinator(
                router=sock, phases=PLAN, seed=3, expected_pods=2, registration_timeout_s=0.2))
            await tg.start(tm.run)
            with anyio.fail_after(20), pytest.raises(GiveUp, match="only 0 of 2 worker pods"):
                await tm.handle(ProfileConfigure(request_id="c", dataset_dir="/unused"))
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
