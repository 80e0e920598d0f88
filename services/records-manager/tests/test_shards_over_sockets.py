"""The records-manager takes `MetricShard`s on its records socket: the exports of records sent
as shards by several record-processors equal those of the same records sent as batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest
import zmq.asyncio

from aiperf.comms import Addressing, Channel, PullSocket, PushSocket
from aiperf.config import Benchmark
from aiperf.messages import (
    ClientLoad,
    ErrorDetails,
    Event,
    Finalize,
    Finalized,
    MetricRecord,
    MetricRecordBatch,
    MetricShard,
    Phase,
    PhaseAccounting,
    ProfileConfigure,
    Progress,
    RecordChannel,
    RunAccounting,
)
from aiperf.metrics import ShardBuilder
from aiperf.records_manager.service import RECORDS_JSONL, SUMMARY_CSV, SUMMARY_JSON, RecordsManager
from aiperf.testing.fixtures import ipc_dir, zctx

__all__ = ["ipc_dir", "zctx"]

pytestmark = pytest.mark.anyio
MS = 1_000_000
T0 = 1_700_000_000 * 10**9
WARMUP, PROFILING = 12, 150


def _records() -> list[MetricRecord]:
    out = []
    for n in range(WARMUP + PROFILING):
        phase = Phase.WARMUP if n < WARMUP else Phase.PROFILING
        start = T0 + n * 7 * MS
        gaps = [MS + (n * 7919 + i * 104729) % (9 * MS) for i in range(63)]
        error = ErrorDetails(code=500, type="Internal Server Error", message="boom") if n % 17 == 0 else None
        metrics: dict[str, float | list[float]] = {"error_isl": 100 + n} if error else {
            "time_to_first_token": 20 * MS + (n * 31337) % (80 * MS), "inter_chunk_latency": gaps,
            "output_sequence_length": 64, "input_sequence_length": 100 + n % 50,
            "request_latency": 20 * MS + sum(gaps)}
        out.append(MetricRecord(
            phase=phase, credit_num=n, worker_id=f"w{n % 3}", conversation_id=f"c{n}", start_wall_ns=start,
            end_wall_ns=start + 700 * MS, metrics=metrics, metadata={"x_request_id": f"r{n}", "request_start_ns": start},
            error=error, response_error=error is not None and n % 2 == 0,
            client_load=ClientLoad(interval_ns=MS, ticks=n, busy_wall_ns=n * MS, busy_cpu_ns=n * MS // 2)
            if n % 10 == 0 else None))
    return out


def _shard(records: list[MetricRecord]) -> MetricShard:
    """What a record-processor in sharded mode sends for `records` (one phase)."""
    builder = ShardBuilder(jsonl=True)
    builder.add_batch(records)
    shard = builder.take(records[0].phase)
    assert shard is not None and not builder.pending
    return shard


class _Progress:
    """The records-manager's progress events: how many records of each phase it has counted."""

    def __init__(self) -> None:
        self.completed: dict[Phase, int] = {}
        self.changed = anyio.Event()

    async def publish(self, event: Event) -> None:
        if isinstance(event, Progress):
            self.completed[event.phase] = event.completed
            self.changed.set()
            self.changed = anyio.Event()

    async def wait(self, phase: Phase, n: int) -> None:
        with anyio.fail_after(10):
            while self.completed.get(phase, 0) < n:
                await self.changed.wait()


def _parts(records: list[MetricRecord], k: int) -> Iterator[list[MetricRecord]]:
    """Consecutive parts of one phase each, about len/k records long."""
    for phase in (Phase.WARMUP, Phase.PROFILING):
        mine = [r for r in records if r.phase == phase]
        step = -(-len(mine) // k)
        yield from (mine[i:i + step] for i in range(0, len(mine), step))


async def _run(zctx: zmq.asyncio.Context, ipc: str, out: Path, sharded: bool) -> Finalized:
    addressing = Addressing(ipc_dir=ipc)
    records = _records()
    progress = _Progress()
    acct = RunAccounting(phases={
        Phase.WARMUP: PhaseAccounting(issued=WARMUP, returned=WARMUP, ok=WARMUP - 1, failed=1),
        Phase.PROFILING: PhaseAccounting(issued=PROFILING, returned=PROFILING, ok=PROFILING - 9, failed=9,
                                         start_ns=0, end_ns=10**9)})
    async with PullSocket[MetricRecordBatch | MetricShard](
            zctx, decode=RecordChannel, channel="records", bind=addressing.bind_endpoints(Channel.RECORDS)) as pull:
        rm = RecordsManager(benchmark=Benchmark(models=["m"]), run_id="r", t0_wall_ns=T0 - 10**9, records=pull,
                            events=progress, artifact_dir=out, progress_interval_s=0.005, wall_clock=lambda: T0)
        async with anyio.create_task_group() as tg:
            await tg.start(rm.run)
            await rm.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
            if sharded:  # three processors, each its own socket; one part after another, in order
                pushes = [PushSocket(zctx, channel="records", linger_ms=1000,
                                     connect=[addressing.connect_endpoint(Channel.RECORDS)]) for _ in range(3)]
                for p in pushes:
                    await p.__aenter__()
                done = {Phase.WARMUP: 0, Phase.PROFILING: 0}
                for i, part in enumerate(_parts(records, 3)):
                    await pushes[i % 3].send(_shard(part))
                    done[part[0].phase] += len(part)
                    await progress.wait(part[0].phase, done[part[0].phase])
                for p in pushes:
                    await p.__aexit__(None, None, None)
            else:
                async with PushSocket(zctx, channel="records", linger_ms=1000,
                                      connect=[addressing.connect_endpoint(Channel.RECORDS)]) as push:
                    for i in range(0, len(records), 32):
                        await push.send(MetricRecordBatch(records=records[i:i + 32]))
            result = await rm.handle(Finalize(request_id="f", accounting=acct, records_timeout_s=10))
            tg.cancel_scope.cancel()
    assert isinstance(result, Finalized)
    return result


async def test_shards_from_several_processors_export_what_the_same_records_as_batches_do(
        zctx: zmq.asyncio.Context, ipc_dir: str, tmp_path: Path) -> None:
    batched = await _run(zctx, ipc_dir, tmp_path / "batches", sharded=False)
    sharded = await _run(zctx, ipc_dir, tmp_path / "shards", sharded=True)
    assert batched.balanced and sharded.balanced, (batched.problems, sharded.problems)
    assert msgspec.structs.replace(sharded, artifact_dir="") == msgspec.structs.replace(batched, artifact_dir="")
    assert sharded.request_count == PROFILING - 9 and sharded.error_request_count == 9
    for name in (SUMMARY_JSON, SUMMARY_CSV, RECORDS_JSONL):
        assert (tmp_path / "shards" / name).read_bytes() == (tmp_path / "batches" / name).read_bytes(), name
    assert len((tmp_path / "shards" / RECORDS_JSONL).read_bytes().splitlines()) == WARMUP + PROFILING


async def test_a_malformed_shard_is_skipped_and_the_next_one_taken(zctx: zmq.asyncio.Context, ipc_dir: str,
                                                                   tmp_path: Path) -> None:
    addressing = Addressing(ipc_dir=ipc_dir)
    good = _shard(_records()[WARMUP:WARMUP + 5])
    bad = [msgspec.structs.replace(good, shard=msgspec.structs.replace(good.shard, row_start=b"\0")),
           msgspec.structs.replace(good, records=6),  # counts that disagree with the aggregate
           msgspec.structs.replace(good, phase=Phase.WARMUP),
           msgspec.structs.replace(good, errors=good.errors + 1)]
    progress = _Progress()
    async with PullSocket[MetricRecordBatch | MetricShard](
            zctx, decode=RecordChannel, channel="records", bind=addressing.bind_endpoints(Channel.RECORDS)) as pull:
        rm = RecordsManager(benchmark=Benchmark(models=["m"]), run_id="r", t0_wall_ns=0, records=pull,
                            events=progress, artifact_dir=tmp_path, progress_interval_s=0.005)
        async with anyio.create_task_group() as tg:
            await tg.start(rm.run)
            async with PushSocket(zctx, channel="records", linger_ms=1000,
                                  connect=[addressing.connect_endpoint(Channel.RECORDS)]) as push:
                for message in bad:
                    await push.send(message)
                await push.send(good)
            await progress.wait(Phase.PROFILING, 5)
            tg.cancel_scope.cancel()
    assert progress.completed == {Phase.PROFILING: 5}


async def test_a_shards_records_are_in_progress_at_once(zctx: zmq.asyncio.Context, ipc_dir: str,
                                                        tmp_path: Path) -> None:
    """A shard's records come at the end of a sharded run: progress says so when it is merged,
    not a tick later (the run may be over by then)."""
    addressing = Addressing(ipc_dir=ipc_dir)
    progress = _Progress()
    async with PullSocket[MetricRecordBatch | MetricShard](
            zctx, decode=RecordChannel, channel="records", bind=addressing.bind_endpoints(Channel.RECORDS)) as pull:
        rm = RecordsManager(benchmark=Benchmark(models=["m"]), run_id="r", t0_wall_ns=0, records=pull,
                            events=progress, artifact_dir=tmp_path, progress_interval_s=3600)
        async with anyio.create_task_group() as tg:
            await tg.start(rm.run)
            async with PushSocket(zctx, channel="records", linger_ms=1000,
                                  connect=[addressing.connect_endpoint(Channel.RECORDS)]) as push:
                await push.send(_shard(_records()[WARMUP:WARMUP + 7]))
            await progress.wait(Phase.PROFILING, 7)
            tg.cancel_scope.cancel()
    assert progress.completed == {Phase.PROFILING: 7}
