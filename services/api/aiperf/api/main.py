"""Entry point of the api process: `python -m aiperf.api.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.api.service import Api
from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the api: the only place that opens its sockets."""
    return Api(service_id=ctx.service_id)


def main(argv: list[str] | None = None) -> int:
    """Run one api process; see `--help`."""
    return service_main(ServiceType.API, build, argv)


if __name__ == "__main__":
    sys.exit(main())
