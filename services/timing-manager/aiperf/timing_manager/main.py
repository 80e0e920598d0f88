"""Entry point of the timing-manager process: `python -m aiperf.timing_manager.main --help`."""

from __future__ import annotations

import sys
import time
from contextlib import AsyncExitStack

import anyio

from aiperf.comms import Channel, Publisher, PullSocket, RouterSocket
from aiperf.issuing.dataset import ReaderConversations
from aiperf.issuing.engine import TimingManager
from aiperf.messages import CreditReturnChannel, CreditUpstream, ServiceType, TimePing
from aiperf.runtime import ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> TimingManager:
    """Wire the timing-manager: the only place that opens its sockets.

    Binds (IPC + TCP) the `credits` ROUTER and the `credit_returns` PULL, connects a
    publisher to the event bus frontend; all close with `stack`.
    """
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


def main(argv: list[str] | None = None) -> int:
    """Run one timing-manager process; see `--help`."""
    return service_main(ServiceType.TIMING_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
