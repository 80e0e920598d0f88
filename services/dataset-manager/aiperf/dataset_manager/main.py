"""Entry point of the dataset-manager process: `python -m aiperf.dataset_manager.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.dataset_manager.service import DatasetManager
from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the dataset-manager: the only place that opens its sockets."""
    return DatasetManager(service_id=ctx.service_id)


def main(argv: list[str] | None = None) -> int:
    """Run one dataset-manager process; see `--help`."""
    return service_main(ServiceType.DATASET_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
