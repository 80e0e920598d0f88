"""Entry point of the records-manager process: `python -m aiperf.records_manager.main --help`."""

from __future__ import annotations

import functools
import sys
from contextlib import AsyncExitStack
from pathlib import Path

from aiperf.comms import Channel, Publisher, PullSocket
from aiperf.messages import MetricRecordBatch, MetricShard, RecordChannel, ServiceType
from aiperf.metrics import OslMismatchThresholds
from aiperf.records_manager.service import RecordsManager
from aiperf.runtime import Service, ServiceContext, service_main
from aiperf.servermetrics.identity import probe_identity


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the records-manager: `records` PULL (dual bind), an event-bus publisher, and the
    probe of what the server is."""
    records = await stack.enter_async_context(PullSocket[MetricRecordBatch | MetricShard](
        ctx.zmq, decode=RecordChannel, channel="records",
        bind=ctx.addressing.bind_endpoints(Channel.RECORDS)))
    events = await stack.enter_async_context(Publisher(
        ctx.zmq, connect=[ctx.addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]))
    config = ctx.config
    limits = OslMismatchThresholds(pct=config.metrics.osl_mismatch_pct_threshold,
                                   max_tokens=config.metrics.osl_mismatch_max_token_threshold)
    return RecordsManager(benchmark=config.benchmark, run_id=config.run_id, t0_wall_ns=config.t0_wall_ns,
                          records=records, events=events, artifact_dir=Path(config.artifact_dir),
                          osl_mismatch=limits, identify=functools.partial(probe_identity, config.benchmark.endpoint.url))


def main(argv: list[str] | None = None) -> int:
    """Run one records-manager process; see `--help`."""
    return service_main(ServiceType.RECORDS_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
