"""Per-pod issuing at the worker-group-manager: its real wiring (`build`, `runtime.issuing:
per_pod`) and real IPC sockets, two fake workers on the pod-local endpoints, and the
controller's side (`ShardedTimingManager` over a real `pods` ROUTER) run in the test."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
import zmq.asyncio

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.comms import Addressing, Channel, DealerSocket, PushSocket, RouterSocket
from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.store import write_dataset
from aiperf.issuing.coordinator import PodCoordinator
from aiperf.issuing.sharded import ShardedTimingManager
from aiperf.messages import (
    Credit,
    CreditChannel,
    CreditReturn,
    GroupReady,
    PodUpstream,
    PrepareGroup,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    ServiceType,
    TimePing,
    TimePong,
    WorkerConnected,
)
from aiperf.runtime.service import ServiceContext
from aiperf.testing.fixtures import ipc_dir
from aiperf.worker_group_manager.main import build

__all__ = ["ipc_dir"]

pytestmark = pytest.mark.anyio


async def fake_worker(ctx: zmq.asyncio.Context, addressing: Addressing, worker_id: str, seen: list[Credit], *,
                      task_status: anyio.abc.TaskStatus[None]) -> None:
    """Ping the pod's engine until ponged, announce itself, then return every credit."""
    async with (DealerSocket[CreditChannel](ctx, identity=worker_id, decode=CreditChannel, channel="credits",
                                            connect=[addressing.pod_local(Channel.CREDITS, "g0")]) as dealer,
                PushSocket(ctx, channel="credit_returns", immediate=True,
                           connect=[addressing.pod_local(Channel.CREDIT_RETURNS, "g0")]) as push):
        await dealer.send(TimePing(worker_id=worker_id, seq=1, sent_at_ns=time.perf_counter_ns()))
        assert isinstance(await dealer.recv(), TimePong)
        await push.send(WorkerConnected(worker_id=worker_id, group_id="g0"))
        task_status.started()
        while True:
            message = await dealer.recv()
            if isinstance(message, Credit):
                seen.append(message)
                await push.send(CreditReturn.of(message, worker_id=worker_id, ok=True))


async def test_the_pod_issues_its_workers_credits_for_the_coordinator(ipc_dir: str) -> None:
    dataset = Path(ipc_dir) / "dataset"
    write_dataset(dataset, [Conversation(id=f"c{i}", turns=[Turn(text="hi", input_tokens=1)]) for i in range(4)])
    benchmark = build_benchmark(ProfileFlags(model=["m"], concurrency=3, request_count=30, warmup_request_count=4),
                                LocalFlags(issuing="per_pod")).benchmark
    config = RunConfig(run_id="t", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       services=ServiceCounts(workers_per_group=2),
                       runtime=RuntimeOptions(registration_timeout_s=10), benchmark=benchmark)
    ctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=ipc_dir)
    seen: dict[str, list[Credit]] = {"worker-g0-0": [], "worker-g0-1": []}
    try:
        async with AsyncExitStack() as stack:
            pods = await stack.enter_async_context(RouterSocket[PodUpstream](
                ctx, decode=PodUpstream, channel="pods", bind=addressing.bind_endpoints(Channel.PODS)))
            tm = ShardedTimingManager(service_id="timing-manager", coordinator=PodCoordinator(
                router=pods, phases=benchmark.phases, seed=benchmark.random_seed, expected_pods=1,
                registration_timeout_s=10))
            wgm = await build(ServiceContext(config=config, service_type=ServiceType.WORKER_GROUP_MANAGER,
                                             service_id="worker-group-manager-g0", group_id="g0", zmq=ctx,
                                             addressing=addressing), stack)
            async with anyio.create_task_group() as tg:
                await tg.start(tm.run)
                await tg.start(wgm.run)
                with anyio.fail_after(20):
                    for worker_id, credits in seen.items():  # answered before any PrepareGroup
                        await tg.start(fake_worker, ctx, addressing, worker_id, credits)
                    ready = await wgm.handle(PrepareGroup(request_id="p", dataset_dir=str(dataset)))  # type: ignore[attr-defined]
                    assert isinstance(ready, GroupReady) and ready.conversations == 4
                    await tm.handle(ProfileConfigure(request_id="c", dataset_dir=str(dataset)))
                    assert tm.coordinator.live_pods == ["g0"] and tm.coordinator.pods["g0"].workers == 2
                    finished = await tm.handle(ProfileStart(request_id="s"))
                tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    assert isinstance(finished, ProfileFinished) and not finished.accounting.cancelled
    books = finished.accounting.phases
    assert (books["warmup"].issued, books["warmup"].ok) == (4, 4)  # type: ignore[index]
    profiling = books["profiling"]  # type: ignore[index]
    assert (profiling.issued, profiling.returned, profiling.ok, profiling.lost) == (30, 30, 30, 0)
    credits = seen["worker-g0-0"] + seen["worker-g0-1"]
    assert sorted(c.num for c in credits if c.phase == "profiling") == list(range(30))
    assert all(seen.values())  # both workers got credits
