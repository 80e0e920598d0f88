"""Entry point of the record-processor process: `python -m aiperf.record_processor.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from aiperf.comms import RAW_RECORDS_HWM, Addressing, Channel, PullSocket, PushSocket
from aiperf.messages import RawRecordChannel, RequestRecord, ServiceType
from aiperf.metrics import ShardBuilder
from aiperf.record_processor.service import RecordProcessor
from aiperf.runtime import Service, ServiceContext, service_main


def instance_index(service_id: str) -> int:
    """`j` of a service id `record-processor-<group>-<j>`; 0 when the id has no such suffix."""
    tail = service_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def raw_records_endpoint(addressing: Addressing, group_id: str, index: int) -> str:
    """IPC endpoint this record-processor binds; its group's workers connect to it."""
    label: Any = f"{group_id}-{index}"  # Addressing.ipc formats any index (annotated int)
    return addressing.ipc(Channel.RAW_RECORDS, index=label)


def raw_part_path(artifact_dir: str, service_id: str) -> Path:
    """Where a record-processor writes its part of profile_export_raw.jsonl (`--export-level
    raw`): `<artifact_dir>/raw/<service_id>.jsonl`, joined by the controller at the end."""
    return Path(artifact_dir) / "raw" / f"{service_id}.jsonl"


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the record-processor: PULL bound on its `raw_records` endpoint (`RAW_RECORDS_HWM`:
    records beyond it wait in the workers), PUSH connected to
    the records-manager's `records`. Both close with `stack`. With `--export-level raw` it also
    writes its part of the raw export (`raw_part_path`); with `--aggregation sharded` it
    aggregates into a `ShardBuilder` (rendering the jsonl lines unless the export level is
    summary)."""
    endpoint = raw_records_endpoint(ctx.addressing, ctx.group_id, instance_index(ctx.service_id))
    raw = await stack.enter_async_context(PullSocket[RequestRecord](
        ctx.zmq, decode=RawRecordChannel, channel="raw_records", bind=[endpoint], hwm=RAW_RECORDS_HWM))
    out = await stack.enter_async_context(PushSocket(
        ctx.zmq, channel="records", connect=[ctx.addressing.connect_endpoint(Channel.RECORDS)]))
    benchmark = ctx.config.benchmark
    export_level = benchmark.artifacts.export_level
    raw_path = raw_part_path(ctx.config.artifact_dir, ctx.service_id) if export_level == "raw" else None
    shards = (ShardBuilder(jsonl=export_level != "summary")
              if benchmark.runtime.aggregation == "sharded" else None)
    return RecordProcessor(service_id=ctx.service_id, endpoint=benchmark.endpoint,
                           tokenizer=benchmark.tokenizer.name, raw=raw, out=out, raw_path=raw_path,
                           trace=benchmark.artifacts.trace, shards=shards)


def main(argv: list[str] | None = None) -> int:
    """Run one record-processor process; see `--help`."""
    return service_main(ServiceType.RECORD_PROCESSOR, build, argv)


if __name__ == "__main__":
    sys.exit(main())
