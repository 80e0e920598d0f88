"""Entry point of the record-processor process: `python -m aiperf.record_processor.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from aiperf.messages import ServiceType
from aiperf.record_processor.service import RecordProcessor
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the record-processor: the only place that opens its sockets."""
    return RecordProcessor(service_id=ctx.service_id)


def main(argv: list[str] | None = None) -> int:
    """Run one record-processor process; see `--help`."""
    return service_main(ServiceType.RECORD_PROCESSOR, build, argv)


if __name__ == "__main__":
    sys.exit(main())
