"""Entry point of the records-manager process: `python -m aiperf.records_manager.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.messages import ServiceType
from aiperf.records_manager.service import RecordsManager
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the records-manager: the only place that opens its sockets."""
    return RecordsManager(service_id=ctx.service_id)


def main(argv: list[str] | None = None) -> int:
    """Run one records-manager process; see `--help`."""
    return service_main(ServiceType.RECORDS_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
