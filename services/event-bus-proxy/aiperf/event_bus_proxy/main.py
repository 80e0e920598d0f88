"""Entry point of the event-bus-proxy process: `python -m aiperf.event_bus_proxy.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.comms import Channel, EventBusProxy
from aiperf.event_bus_proxy.service import EventBusProxyService
from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the proxy on the event-bus frontend and backend endpoints (dual bind)."""
    proxy = EventBusProxy(ctx.zmq, frontend=ctx.addressing.bind_endpoints(Channel.EVENT_BUS_FRONTEND),
                          backend=ctx.addressing.bind_endpoints(Channel.EVENT_BUS_BACKEND))
    return EventBusProxyService(proxy=proxy)


def main(argv: list[str] | None = None) -> int:
    """Run one event-bus-proxy process; see `--help`."""
    return service_main(ServiceType.EVENT_BUS_PROXY, build, argv)


if __name__ == "__main__":
    sys.exit(main())
