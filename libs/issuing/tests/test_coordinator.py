"""The real `PodCoordinator` over a real ROUTER (IPC) with a handful of simulated pods on
DEALERs: slices handed out, counters summed exactly, a silent pod declared lost, a cancel passed
on."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
import zmq.asyncio

from aiperf.config import ConcurrencyPhase, ConstantPhase
from aiperf.issuing.coordinator import PodCoordinator
from aiperf.issuing.slices import PhaseSlice, decode_slice, slice_phase
from aiperf.messages import PodCancel, PodCounts, PodHello, PodPhaseStart, PodReport
from aiperf.runtime import GiveUp
from tests._pods import dealer, router

pytestmark = pytest.mark.anyio

PLAN = [ConcurrencyPhase(name="warmup", concurrency=3, requests=7),
        ConstantPhase(name="profiling", rate=500.0, requests=23)]

Behaviour = Callable[[str, int, PhaseSlice], str]
"""What a fake pod does in a phase: "ok" (settles its share: one failure when it has any),
"silent" (reports 2 in flight once, then nothing), "wait" (reports until cancelled)."""


def ok(pod_id: str, index: int, piece: PhaseSlice) -> str:
    return "ok"


async def fake_pod(ctx: zmq.asyncio.Context, ipc_dir: str, pod_id: str, behaviour: Behaviour,
                   got: dict[str, list[PhaseSlice]], *, task_status: anyio.abc.TaskStatus[None]) -> None:
    async with dealer(ctx, ipc_dir, pod_id) as link:
        await link.send(PodHello(pod_id=pod_id, workers=4))
        task_status.started()
        seq = 0
        while True:
            message = await link.recv()
            assert isinstance(message, PodPhaseStart)
            piece = decode_slice(message.slice)
            got.setdefault(pod_id, []).append(piece)
            share = piece.requests or 0
            what = behaviour(pod_id, message.phase_index, piece)
            seq += 1
            await link.send(PodReport(pod_id=pod_id, phase_index=message.phase_index, seq=seq,
                                      counts=PodCounts(issued=min(share, 2), in_flight=min(share, 2))))
            if what == "silent":
                await anyio.sleep_forever()
            if what == "wait":
                cancel = await link.recv()
                assert isinstance(cancel, PodCancel) and cancel.reason == "user"
                total = PodCounts(issued=min(share, 2), cancelled=min(share, 2))
            else:
                total = PodCounts(issued=share, ok=max(share - 1, 0), failed=min(share, 1))
            seq += 1
            await link.send(PodReport(pod_id=pod_id, phase_index=message.phase_index, seq=seq, counts=total,
                                      final=True))


async def run_pods(ipc_dir: str, pods: int, behaviour: Behaviour = ok, *, cancel_after_start: bool = False,
                   lost_after_s: float = 10.0) -> tuple[PodCoordinator, object, dict[str, list[PhaseSlice]]]:
    got: dict[str, list[PhaseSlice]] = {}
    ctx = zmq.asyncio.Context()
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            coordinator = PodCoordinator(router=sock, phases=PLAN, seed=5, expected_pods=pods,
                                         registration_timeout_s=10, lost_after_s=lost_after_s, check_every_s=0.05)
            await tg.start(coordinator.run)
            with anyio.fail_after(20):
                for i in range(pods):
                    await tg.start(fake_pod, ctx, ipc_dir, f"pod-{i}", behaviour, got)
                assert await coordinator.wait_registered() == pods
                if cancel_after_start:
                    async def cancel_soon() -> None:
                        while not coordinator.phases or coordinator.phases[0].reports < pods:
                            await anyio.sleep(0.01)
                        coordinator.cancel("user")
                    tg.start_soon(cancel_soon)
                totals = await coordinator.start()
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    return coordinator, totals, got


async def test_the_pods_get_their_slices_and_the_totals_are_the_exact_sums(ipc_dir: str) -> None:
    coordinator, totals, got = await run_pods(ipc_dir, 5)
    assert not totals.cancelled and totals.stopped_reason == ""
    assert [got[f"pod-{i}"] for i in range(5)] == [[slice_phase(p, 5, seed=5)[i] for p in PLAN] for i in range(5)]
    warmup, profiling = totals.phases
    active = {"warmup": 3, "profiling": 5}
    for book, phase in zip(totals.phases, PLAN, strict=True):
        assert book.pods == [f"pod-{i}" for i in range(5)] and not book.lost_pods
        assert book.counts == PodCounts(issued=phase.requests, ok=phase.requests - active[phase.name],
                                        failed=active[phase.name])
    assert (warmup.reports, profiling.reports) == (10, 10) and coordinator.ignored == 0


async def test_a_silent_pod_is_lost_with_its_credits_and_left_out_of_later_phases(ipc_dir: str) -> None:
    def behaviour(pod_id: str, index: int, piece: PhaseSlice) -> str:
        return "silent" if pod_id == "pod-1" and index == 0 else "ok"

    coordinator, totals, got = await run_pods(ipc_dir, 4, behaviour, lost_after_s=0.3)
    warmup, profiling = totals.phases
    assert warmup.lost_pods == ["pod-1"]
    # pod-1's share of 7 among 3 active pods is 2: both in flight when it went silent
    assert warmup.counts == PodCounts(issued=7, ok=3, failed=2, lost=2)
    assert profiling.pods == ["pod-0", "pod-2", "pod-3"] and len(got["pod-1"]) == 1
    assert profiling.counts == PodCounts(issued=23, ok=20, failed=3)
    assert coordinator.live_pods == ["pod-0", "pod-2", "pod-3"]


async def test_a_cancel_reaches_every_pod_and_stops_the_run(ipc_dir: str) -> None:
    _coordinator, totals, got = await run_pods(ipc_dir, 3, lambda *_: "wait", cancel_after_start=True)
    assert totals.cancelled and totals.stopped_reason == "user" and len(totals.phases) == 1
    assert totals.phases[0].counts == PodCounts(issued=6, cancelled=6)
    assert all(len(pieces) == 1 for pieces in got.values())


async def test_missing_pods_fail_registration(ipc_dir: str) -> None:
    ctx = zmq.asyncio.Context()
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            coordinator = PodCoordinator(router=sock, phases=PLAN, seed=None, expected_pods=2,
                                         registration_timeout_s=0.2)
            await tg.start(coordinator.run)
            async with dealer(ctx, ipc_dir, "pod-0") as link:
                await link.send(PodHello(pod_id="pod-0", workers=1))
                with anyio.fail_after(10), pytest.raises(GiveUp, match="only 1 of 2 worker pods registered"):
                    await coordinator.wait_registered()
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)


def test_stale_unknown_and_late_reports_change_nothing() -> None:
    coordinator = PodCoordinator(router=None, phases=PLAN, seed=None, expected_pods=1,  # type: ignore[arg-type]
                                 registration_timeout_s=1, clock=lambda: 0)
    coordinator.take(b"a", PodHello(pod_id="a", workers=1))
    coordinator.take(b"x", PodReport(pod_id="x", phase_index=0, seq=1, counts=PodCounts(issued=1)))  # no phase yet
    assert coordinator.ignored == 1 and list(coordinator.pods) == ["a"]


class MemoryRouter:
    """The coordinator's router port in memory: records what it sends, receives nothing."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, object]] = []

    async def send(self, peer: bytes, message: object) -> None:
        self.sent.append((peer, message))

    async def recv(self) -> tuple[bytes, object]:
        await anyio.sleep_forever()
        raise AssertionError


async def test_loss_is_judged_on_the_injected_clock() -> None:
    """A pod is lost once silent for more than `lost_after_s` of the coordinator's clock; a pod
    that keeps reporting is not, however long the phase runs."""
    now = [0]
    memory = MemoryRouter()
    coordinator: PodCoordinator

    async def sleep(seconds: float) -> None:  # every check advances the clock by its interval,
        now[0] += round(seconds * 1e9)        # and pod-0 reports in between
        seq = now[0] // 10**9
        final = seq >= 30
        counts = PodCounts(issued=1, ok=1) if final else PodCounts(issued=1, in_flight=1)
        coordinator.take(b"pod-0", PodReport(pod_id="pod-0", phase_index=0, seq=seq, counts=counts, final=final))
        await anyio.sleep(0)

    coordinator = PodCoordinator(router=memory, phases=PLAN[:1], seed=None, expected_pods=2,  # type: ignore[arg-type]
                                 registration_timeout_s=1, lost_after_s=5.0, check_every_s=1.0,
                                 clock=lambda: now[0], sleep=sleep)
    for pod_id in ("pod-0", "pod-1"):
        coordinator.take(pod_id.encode(), PodHello(pod_id=pod_id, workers=1))
    with anyio.fail_after(10):
        book = await coordinator.run_phase(0)
    assert [type(m).__name__ for _, m in memory.sent] == ["PodPhaseStart", "PodPhaseStart"]
    assert book.lost_pods == ["pod-1"] and coordinator.live_pods == ["pod-0"]
    assert book.per_pod["pod-1"] == PodCounts() and book.counts == PodCounts(issued=1, ok=1)
    assert book.reports == 30  # pod-0 reported through 30 s of the injected clock and stayed
