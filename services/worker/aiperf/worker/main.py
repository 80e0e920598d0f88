"""Entry point of the worker process: `python -m aiperf.worker.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main
from aiperf.worker.service import Worker


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the worker: the only place that opens its sockets."""
    return Worker(service_id=ctx.service_id)


def main(argv: list[str] | None = None) -> int:
    """Run one worker process; see `--help`."""
    return service_main(ServiceType.WORKER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
