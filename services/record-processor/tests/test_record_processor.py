"""The record-processor on memory streams (unit) and on real sockets wired by `main.build`."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import msgspec
import orjson
import pytest
import zmq.asyncio

from aiperf.comms import RAW_RECORDS_HWM, Addressing, BadMessage, Channel, PullSocket, PushSocket
from aiperf.config import Benchmark, CommsOptions, Endpoint, RunConfig, Runtime, TokenizerSpec
from aiperf.messages import (
    ClientLoad,
    FlushRawRecords,
    HttpTrace,
    MetricRecord,
    MetricRecordBatch,
    MetricShard,
    Phase,
    ProfileConfigure,
    ProfileStart,
    RecordChannel,
    RequestRecord,
    SendShards,
    ServiceType,
    ShardsSent,
)
from aiperf.metrics import Aggregator, ShardBuilder
from aiperf.record_processor.main import build, instance_index, raw_records_endpoint
from aiperf.record_processor.service import RecordProcessor
from aiperf.runtime import GiveUp, ServiceContext, UnknownCommand, UserError
from aiperf.tokenizer import Tokenizer

pytestmark = pytest.mark.anyio

MS = 1_000_000
T0 = 10_000 * MS


def sse(piece: str) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"delta": {"content": piece}}]}) + b"\n\n"


def streamed(num: int, *, offsets_ms: Sequence[int] = (40, 48, 56, 64), **kw: Any) -> RequestRecord:
    """A streamed record whose i-th content event arrived `offsets_ms[i]` after the start."""
    chunks = [sse(f"w{i} ") for i in range(len(offsets_ms))] + [b"data: [DONE]\n\n"]
    chunk_ns = [T0 + o * MS for o in offsets_ms] + [T0 + (offsets_ms[-1] + 1) * MS]
    fields: dict[str, Any] = dict(
        worker_id="w0", phase=Phase.PROFILING, credit_num=num, conversation_id="c", streaming=True,
        input_tokens=100, start_ns=T0, start_wall_ns=1_700_000_000 * 10**9, end_ns=chunk_ns[-1],
        status=200, chunks=chunks, chunk_ns=chunk_ns, credit_received_ns=T0 - MS)
    fields.update(kw)
    return RequestRecord(**fields)


class WordTokenizer:
    name = "words"

    def encode(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def decode(self, ids: Sequence[int]) -> str:
        return ""

    def count(self, text: str) -> int:
        return len(text.split())


class MemoryRaw:
    """Raw source on a memory stream; a `None` item raises `BadMessage` (an undecodable frame)."""

    def __init__(self) -> None:
        self.tx, self.rx = anyio.create_memory_object_stream[RequestRecord | None](100)

    async def recv(self) -> RequestRecord:
        item = await self.rx.receive()
        if item is None:
            raise BadMessage(peer=None, channel="raw_records", reason="garbage")
        return item


class MemoryOut:
    """Sink of batches on a memory stream; `next` returns their records one by one."""

    def __init__(self) -> None:
        self.tx, self.rx = anyio.create_memory_object_stream[MetricRecordBatch](100)
        self._records: deque[MetricRecord] = deque()

    async def send(self, message: object) -> None:
        assert isinstance(message, MetricRecordBatch) and message.records
        await self.tx.send(message)

    async def next(self) -> MetricRecord:
        if not self._records:
            with anyio.fail_after(10):
                self._records.extend((await self.rx.receive()).records)
        return self._records.popleft()


STREAMING_CHAT = Endpoint(streaming=True)


def loader_of(tokenizer: Tokenizer) -> Any:
    return lambda spec: tokenizer


async def run_processor(processor: RecordProcessor, raw: MemoryRaw, out: MemoryOut, body: Any) -> None:
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(processor.run)
            await body()
            tg.cancel_scope.cancel()
    finally:
        for stream in (raw.tx, raw.rx, out.tx, out.rx):
            stream.close()


async def test_records_in_metric_records_out_with_exact_ttft() -> None:
    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="record-processor-g0-0", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()))

    async def body() -> None:
        await raw.tx.send(streamed(1))
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(anyio.WouldBlock):  # no tokenizer yet: the record waits
            out.rx.receive_nowait()
        assert await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d")) is None
        m = await out.next()
        assert m.credit_num == 1 and m.error is None and m.processor_id == "record-processor-g0-0"
        assert m.metrics["time_to_first_token"] == 40 * MS
        assert m.metrics["inter_chunk_latency"] == [8 * MS, 8 * MS, 8 * MS]
        assert m.metrics["request_latency"] == 64 * MS
        assert m.metrics["output_sequence_length"] == 4
        assert m.metrics["input_sequence_length"] == 100
        assert m.metrics["credit_to_send_delay"] == MS
        await raw.tx.send(None)  # an undecodable frame is skipped
        trace = HttpTrace(reused=True, send_start_ns=T0, send_end_ns=T0 + MS // 10, recv_first_ns=T0 + 3 * MS,
                          recv_last_ns=T0 + 7 * MS, sent_bytes=300, recv_bytes=900, writes=1, reads=3)
        await raw.tx.send(streamed(2, offsets_ms=(5, 6), requested_output_tokens=4, http=trace))
        second = (await out.next()).metrics
        assert second["time_to_first_token"] == 5 * MS
        assert second["osl_mismatch_diff_pct"] == -50.0  # 2 of the 4 tokens requested
        assert second["http_req_waiting"] == 3 * MS - MS // 10 and second["http_req_data_received"] == 900
        assert second["http_req_connection_reused"] == 1
        load = ClientLoad(interval_ns=10**7, ticks=3, lag_counts=[3], busy_wall_ns=3 * 10**7)
        await raw.tx.send(streamed(3, client_load=load))
        third = await out.next()
        assert third.client_load == load and third.metrics["time_to_first_token"] == 40 * MS  # carried on

    await run_processor(rp, raw, out, body)


async def test_errors_and_cancellations_become_error_metric_records() -> None:
    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()))

    async def body() -> None:
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        await raw.tx.send(streamed(1, status=500, chunks=[b'{"error":{"message":"boom"}}'], chunk_ns=[T0]))
        await raw.tx.send(streamed(2, cancelled=True))
        first, second = await out.next(), await out.next()
        assert first.error is not None and first.error.code == 500 and first.error.message == "boom"
        assert first.metrics == {"error_isl": 100}
        assert second.cancelled and second.error is not None
        assert second.error.type == "RequestCancellationError"

    await run_processor(rp, raw, out, body)


async def test_with_trace_export_a_record_carries_its_http_trace_in_aiperfs_shape() -> None:
    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()), trace=True)
    http = HttpTrace(send_start_ns=T0, send_end_ns=T0 + MS, recv_first_ns=T0 + 2 * MS, recv_last_ns=T0 + 3 * MS)

    async def body() -> None:
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        await raw.tx.send(msgspec.structs.replace(streamed(1), http=http))
        await raw.tx.send(streamed(2))
        traced, untraced = await out.next(), await out.next()
        assert traced.trace_data is not None and traced.trace_data["sending_ns"] == MS
        assert untraced.trace_data is None  # the worker has no trace of it

    await run_processor(rp, raw, out, body)


async def test_raw_lines_are_written_before_their_metric_records_and_flushed_on_command(tmp_path: Path) -> None:
    raw, out = MemoryRaw(), MemoryOut()
    part = tmp_path / "raw" / "rp.jsonl"
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()), raw_path=part)

    async def body() -> None:
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        for num in range(3):
            await raw.tx.send(streamed(num))
        for _ in range(3):
            await out.next()
        assert not part.exists()  # staged until the flush
        flushed = await rp.handle(FlushRawRecords(request_id="f"))
        assert flushed is not None and (flushed.path, flushed.records) == (str(part), 3)
        assert flushed.size == part.stat().st_size
        lines = [orjson.loads(line) for line in part.read_bytes().splitlines()]
        assert [line["metadata"]["credit_num"] for line in lines] == [0, 1, 2]

    await run_processor(rp, raw, out, body)


async def test_the_raw_flush_and_the_end_of_run_send_the_current_batch_at_once(tmp_path: Path) -> None:
    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()), raw_path=tmp_path / "rp.jsonl",
                         batch_records=32, batch_delay_s=3600)
    async with anyio.create_task_group() as tg:
        await tg.start(rp.run)
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        for num in range(3):
            await raw.tx.send(streamed(num))
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(anyio.WouldBlock):  # a batch of 3, not due for an hour
            out.rx.receive_nowait()
        flushed = await rp.handle(FlushRawRecords(request_id="f"))
        assert flushed is not None and flushed.records == 3
        assert [r.credit_num for r in out.rx.receive_nowait().records] == [0, 1, 2]
        await raw.tx.send(streamed(3))
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert [r.credit_num for r in out.rx.receive_nowait().records] == [3]  # sent as the run stopped
    for stream in (raw.tx, raw.rx, out.tx, out.rx):
        stream.close()


async def test_a_raw_part_that_cannot_be_created_fails_configure(tmp_path: Path) -> None:
    (tmp_path / "raw").write_text("a file where the folder should be")
    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()), raw_path=tmp_path / "raw" / "rp.jsonl")

    async def body() -> None:
        with pytest.raises(GiveUp, match="cannot create the raw records file"):
            await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))

    await run_processor(rp, raw, out, body)


async def test_a_failure_to_process_still_yields_a_record() -> None:
    class Broken(WordTokenizer):
        def count(self, text: str) -> int:
            raise RuntimeError("tokenizer exploded")

    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(Broken()))

    async def body() -> None:
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        await raw.tx.send(streamed(7))
        m = await out.next()
        assert m.credit_num == 7 and m.error is not None and m.error.type == "RecordProcessingError"
        assert "tokenizer exploded" in m.error.message

    await run_processor(rp, raw, out, body)


async def test_bad_tokenizer_is_a_user_error_with_the_same_line() -> None:
    raw, out = MemoryRaw(), MemoryOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer="/no/such/tokenizer", raw=raw, out=out)
    try:
        with pytest.raises(UserError) as info:
            await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        assert str(info.value).startswith("--tokenizer /no/such/tokenizer: not a tokenizer.json")
        assert "\n" not in str(info.value)
        with pytest.raises(UnknownCommand, match="does not handle ProfileStart"):
            await rp.handle(ProfileStart(request_id="s"))
    finally:
        for stream in (raw.tx, raw.rx, out.tx, out.rx):
            stream.close()


def test_instance_index_and_endpoint() -> None:
    assert instance_index("record-processor-g0-3") == 3
    assert instance_index("record-processor") == 0
    assert raw_records_endpoint(Addressing(ipc_dir="/tmp/x"), "g1", 2) == "ipc:///tmp/x/raw_records-g1-2.ipc"


async def test_real_sockets_and_builtin_tokenizer(zctx: zmq.asyncio.Context, ipc_dir: str) -> None:
    addressing = Addressing(ipc_dir=ipc_dir)
    config = RunConfig(run_id="t", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       benchmark=Benchmark(models=["m"], endpoint=STREAMING_CHAT, tokenizer=TokenizerSpec(name="builtin")))
    ctx = ServiceContext(config=config, service_type=ServiceType.RECORD_PROCESSOR,
                         service_id="record-processor-g0-1", group_id="g0", zmq=zctx, addressing=addressing)
    async with (PullSocket[MetricRecordBatch](zctx, decode=RecordChannel, channel="records",
                                         bind=addressing.bind_endpoints(Channel.RECORDS)) as records,
                PushSocket(zctx, channel="raw_records", linger_ms=0,
                           connect=[raw_records_endpoint(addressing, "g0", 1)]) as worker,
                AsyncExitStack() as stack):
        rp = await build(ctx, stack)
        assert isinstance(rp, RecordProcessor)
        async with anyio.create_task_group() as tg:
            await tg.start(rp.run)
            await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
            for num in range(5):
                await worker.send(streamed(num))
            got: list[MetricRecord] = []
            with anyio.fail_after(10):
                while len(got) < 5:
                    got.extend((await records.recv()).records)
            tg.cancel_scope.cancel()
    assert sorted(m.credit_num for m in got) == list(range(5))
    for m in got:
        assert m.processor_id == "record-processor-g0-1" and m.error is None
        assert m.metrics["time_to_first_token"] == 40 * MS
        assert m.metrics["output_token_count"] >= 4


class ListOut:
    """Sink that keeps every message sent, in order."""

    def __init__(self) -> None:
        self.sent: list[object] = []

    async def send(self, message: object) -> None:
        self.sent.append(message)


async def test_sharded_records_go_out_as_one_shard_per_phase_on_send_shards_and_later_ones_in_batches() -> None:
    raw, out = MemoryRaw(), ListOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()), batch_delay_s=3600,
                         shards=ShardBuilder(jsonl=True))
    records = [streamed(n, phase=Phase.WARMUP) for n in range(2)] + [
        streamed(n, offsets_ms=(40 + n, 50 + 2 * n, 60)) for n in range(3)]
    async with anyio.create_task_group() as tg:
        await tg.start(rp.run)
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        for record in records:
            await raw.tx.send(record)
        await anyio.wait_all_tasks_blocked()
        assert out.sent == []  # held until asked
        sent = await rp.handle(SendShards(request_id="s"))
        assert sent == ShardsSent(shards=2, records=5)
        shards = [m for m in out.sent if isinstance(m, MetricShard)]
        assert [(m.phase, m.records) for m in shards] == [(Phase.WARMUP, 2), (Phase.PROFILING, 3)]
        assert len(shards[1].jsonl.splitlines()) == 3
        await raw.tx.send(streamed(3))  # one still on its way: a batch, at the end of the run
        await anyio.wait_all_tasks_blocked()
        assert await rp.handle(SendShards(request_id="again")) == ShardsSent()
        tg.cancel_scope.cancel()
    assert isinstance(out.sent[-1], MetricRecordBatch) and [r.credit_num for r in out.sent[-1].records] == [3]
    merged, fed = Aggregator(), Aggregator()  # the shards stand for exactly the records' metrics
    for shard in shards:
        merged.merge(shard.shard)
    fed.add_batch([rp.process(r) for r in records])
    assert merged.summary(benchmark_duration_s=1.0) == fed.summary(benchmark_duration_s=1.0)
    for stream in (raw.tx, raw.rx):
        stream.close()


async def test_a_stopping_sharded_processor_sends_its_shards(tmp_path: Path) -> None:
    raw, out = MemoryRaw(), ListOut()
    rp = RecordProcessor(service_id="rp", endpoint=STREAMING_CHAT, tokenizer=None, raw=raw, out=out,
                         tokenizer_loader=loader_of(WordTokenizer()), shards=ShardBuilder(jsonl=False))
    async with anyio.create_task_group() as tg:
        await tg.start(rp.run)
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        for num in range(4):
            await raw.tx.send(streamed(num))
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert [(type(m), m.records, m.jsonl) for m in out.sent if isinstance(m, MetricShard)] == [(MetricShard, 4, b"")]
    for stream in (raw.tx, raw.rx):
        stream.close()


async def test_real_sockets_with_sharded_aggregation(zctx: zmq.asyncio.Context, ipc_dir: str) -> None:
    """`main.build` reads `runtime.aggregation`: the records come as one shard on `SendShards`."""
    addressing = Addressing(ipc_dir=ipc_dir)
    config = RunConfig(run_id="t", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       benchmark=Benchmark(models=["m"], endpoint=STREAMING_CHAT, tokenizer=TokenizerSpec(name="builtin"),
                                           runtime=Runtime(aggregation="sharded")))
    ctx = ServiceContext(config=config, service_type=ServiceType.RECORD_PROCESSOR,
                         service_id="record-processor-g0-0", group_id="g0", zmq=zctx, addressing=addressing)
    async with (PullSocket[MetricRecordBatch | MetricShard](zctx, decode=RecordChannel, channel="records",
                                                            bind=addressing.bind_endpoints(Channel.RECORDS)) as records,
                PushSocket(zctx, channel="raw_records", linger_ms=0,
                           connect=[raw_records_endpoint(addressing, "g0", 0)]) as worker,
                AsyncExitStack() as stack):
        rp = await build(ctx, stack)
        assert isinstance(rp, RecordProcessor)
        async with anyio.create_task_group() as tg:
            await tg.start(rp.run)
            await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
            for num in range(5):
                await worker.send(streamed(num))
            with anyio.fail_after(10):
                while rp.processed < 5:
                    await anyio.sleep(0.01)
            assert await rp.handle(SendShards(request_id="s")) == ShardsSent(shards=1, records=5)
            with anyio.fail_after(10):
                got = await records.recv()
            tg.cancel_scope.cancel()
    assert isinstance(got, MetricShard) and (got.phase, got.records) == (Phase.PROFILING, 5)
    assert len(got.jsonl.splitlines()) == 5  # export level records: the lines travel with it


async def test_a_processor_that_falls_behind_holds_a_bounded_queue_and_loses_no_record(
        zctx: zmq.asyncio.Context, ipc_dir: str) -> None:
    """Records for a processor that does not read (here: not configured yet) queue up to
    `RAW_RECORDS_HWM` at each end of the connection (plus what the IPC socket buffers), then the
    worker's push waits; once the processor reads, every record comes out."""
    addressing = Addressing(ipc_dir=ipc_dir)
    config = RunConfig(run_id="t", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       benchmark=Benchmark(models=["m"], endpoint=STREAMING_CHAT, tokenizer=TokenizerSpec(name="builtin")))
    ctx = ServiceContext(config=config, service_type=ServiceType.RECORD_PROCESSOR,
                         service_id="record-processor-g0-0", group_id="g0", zmq=zctx, addressing=addressing)
    offsets = tuple(range(40, 40 + 64))  # a 64-event stream: ~5 KB on the wire
    async with (PullSocket[MetricRecordBatch](zctx, decode=RecordChannel, channel="records",
                                         bind=addressing.bind_endpoints(Channel.RECORDS)) as records,
                PushSocket(zctx, channel="raw_records", linger_ms=0, hwm=RAW_RECORDS_HWM,
                           connect=[raw_records_endpoint(addressing, "g0", 0)]) as worker,
                AsyncExitStack() as stack):
        rp = await build(ctx, stack)
        async with anyio.create_task_group() as tg:
            await tg.start(rp.run)
            pushed = 0
            with anyio.fail_after(60):
                while True:  # until a push has waited 1 s: both ends full (a slow host only stops earlier)
                    try:
                        worker.send_nowait(streamed(pushed, offsets_ms=offsets))
                    except anyio.WouldBlock:
                        with anyio.move_on_after(1.0):
                            await worker.send(streamed(pushed, offsets_ms=offsets))
                            pushed += 1
                            continue
                        break
                    pushed += 1
            assert RAW_RECORDS_HWM <= pushed <= 2 * RAW_RECORDS_HWM + 256
            await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
            got: list[int] = []
            with anyio.fail_after(60):
                while len(got) < pushed:
                    got.extend(m.credit_num for m in (await records.recv()).records)
            tg.cancel_scope.cancel()
    assert got == list(range(pushed))
