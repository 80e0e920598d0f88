"""Entry point of the timing-manager process: `python -m aiperf.timing_manager.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main
from aiperf.timing_manager.service import TimingManager


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the timing-manager: the only place that opens its sockets."""
    return TimingManager(service_id=ctx.service_id)


def main(argv: list[str] | None = None) -> int:
    """Run one timing-manager process; see `--help`."""
    return service_main(ServiceType.TIMING_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
