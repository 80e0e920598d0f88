"""Entry point of the timing-manager process: `python -m aiperf.timing_manager.main --help`."""

from __future__ import annotations

import sys
import time
from contextlib import AsyncExitStack

import anyio

from aiperf.comms import Channel, Publisher, PullSocket, RouterSocket
from aiperf.issuing.coordinator import PodCoordinator
from aiperf.issuing.dataset import ReaderConversations
from aiperf.issuing.engine import TimingManager
from aiperf.issuing.sharded import ShardedTimingManager
from aiperf.messages import CreditReturnChannel, CreditUpstream, PodUpstream, ServiceType, TimePing
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the timing-manager: the only place that opens its sockets.

    Central issuing (the default): binds (IPC + TCP) the `credits` ROUTER and the
    `credit_returns` PULL. Per-pod issuing (`runtime.issuing: per_pod`): binds the `pods`
    ROUTER instead and coordinates the worker pods (`build_sharded`). Either way it connects a
    publisher to the event bus frontend; all close with `stack`.
    """
    if ctx.config.benchmark.runtime.issuing == "per_pod":
        return await build_sharded(ctx, stack)
    credits = await stack.enter_async_context(RouterSocket[TimePing](
        ctx.zmq, decode=CreditUpstream, channel="credits",
        bind=ctx.addressing.bind_endpoints(Channel.CREDITS)))
    returns = await stack.enter_async_context(PullSocket[CreditReturnChannel](
        ctx.zmq, decode=CreditReturnChannel, channel="credit_returns",
        bind=ctx.addressing.bind_endpoints(Channel.CREDIT_RETURNS)))
    events = await stack.enter_async_context(Publisher(
        ctx.zmq, connect=[ctx.addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]))
    return TimingManager(
        service_id=ctx.service_id, phases=ctx.config.benchmark.phases, seed=ctx.config.benchmark.random_seed,
        expected_workers=ctx.config.services.expected()[ServiceType.WORKER],
        registration_timeout_s=ctx.config.runtime.registration_timeout_s,
        credits=credits, returns=returns, events=events,
        open_conversations=ReaderConversations.open,
        clock=time.perf_counter_ns, wall_clock=time.time_ns, sleep=anyio.sleep,
        cancel_drain_s=ctx.config.runtime.cancel_drain_s, urls=len(ctx.config.benchmark.endpoint.urls))


async def build_sharded(ctx: ServiceContext, stack: AsyncExitStack) -> ShardedTimingManager:
    """The per-pod timing-manager: a `PodCoordinator` on the `pods` ROUTER (IPC + TCP) expecting
    one pod per worker group (each group's worker-group-manager issues its workers' credits)."""
    pods = await stack.enter_async_context(RouterSocket[PodUpstream](
        ctx.zmq, decode=PodUpstream, channel="pods", bind=ctx.addressing.bind_endpoints(Channel.PODS)))
    events = await stack.enter_async_context(Publisher(
        ctx.zmq, connect=[ctx.addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]))
    runtime = ctx.config.runtime
    coordinator = PodCoordinator(
        router=pods, phases=ctx.config.benchmark.phases, seed=ctx.config.benchmark.random_seed,
        expected_pods=ctx.config.services.worker_groups, registration_timeout_s=runtime.registration_timeout_s,
        lost_after_s=runtime.heartbeat_timeout_s, events=events)
    return ShardedTimingManager(service_id=ctx.service_id, coordinator=coordinator)


def main(argv: list[str] | None = None) -> int:
    """Run one timing-manager process; see `--help`."""
    return service_main(ServiceType.TIMING_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
