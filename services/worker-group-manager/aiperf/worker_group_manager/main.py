"""Entry point of the worker-group-manager process: `python -m aiperf.worker_group_manager.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main
from aiperf.worker_group_manager.service import WorkerGroupManager


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the worker-group-manager of group `--group-id`."""
    counts = ctx.config.services
    members = ([f"worker-{ctx.group_id}-{i}" for i in range(counts.workers_per_group)]
               + [f"record-processor-{ctx.group_id}-{j}" for j in range(counts.record_processors_per_group)])
    return WorkerGroupManager(service_id=ctx.service_id, group_id=ctx.group_id, members=members)


def main(argv: list[str] | None = None) -> int:
    """Run one worker-group-manager process; see `--help`."""
    return service_main(ServiceType.WORKER_GROUP_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
