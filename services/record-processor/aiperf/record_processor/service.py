"""Parses raw records and computes per-request metrics.

One `MetricRecord` goes out for every `RequestRecord` that comes in, in arrival order, even
when parsing fails (the record then carries a `RecordProcessingError`), so the
records-manager's count of records per returned credit always balances. They go in batches
(`batching.RecordBatcher`: up to 32 records, none held more than 5 ms), or, with sharded
aggregation, into a `ShardBuilder` whose shards go on `SendShards`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from aiperf.comms import BadMessage
from aiperf.config import Endpoint
from aiperf.endpoints import parse_response
from aiperf.messages import (
    Command,
    ErrorDetails,
    FlushRawRecords,
    MetricRecord,
    ProfileConfigure,
    RawRecordsFlushed,
    Reply,
    RequestRecord,
    SendShards,
    ShardsSent,
)
from aiperf.metrics import RawPartWriter, ShardBuilder, compute_metrics
from aiperf.metrics.trace_export import trace_data
from aiperf.record_processor.batching import MAX_DELAY_S, MAX_RECORDS, RecordBatcher, Sink
from aiperf.runtime import GiveUp, UnknownCommand, UserError
from aiperf.tokenizer import Tokenizer, TokenizerError, load_tokenizer

log = structlog.get_logger("aiperf.record_processor")


class RawSource(Protocol):
    """Where raw records come from (a `PullSocket` in production); may raise `BadMessage`."""

    async def recv(self) -> RequestRecord: ...


LoadTokenizer = Callable[[str | None], Tokenizer]
SHUTDOWN_FLUSH_S = 1.0
"""How long a stopping record-processor tries to send its last batch (its peer may be gone)."""


class RecordProcessor:
    """Turns each `RequestRecord` into a `MetricRecord`, one at a time, parsing responses of
    `endpoint` and counting tokens with `tokenizer` (a tokenizer.json path; None: bundled).

    The tokenizer loads as soon as the service runs; records that arrive before
    `ProfileConfigure` confirmed it loaded wait for it. Must be constructed inside the event loop.

    With `raw_path` (`--export-level raw`) every record is also written, before its metric
    record goes out, to that part of the raw export (staged from `ProfileConfigure`, published
    by `FlushRawRecords`), so once the records-manager has a processor's metric records, their
    raw lines are in its part.

    Metric records go to `out` in `MetricRecordBatch`es of up to `batch_records`, none held
    more than `batch_delay_s` (see `batching`); `FlushRawRecords` and the end of `run` send the
    current batch first. With `shards` (`runtime.aggregation: sharded`) they go into it instead
    (`batch_records` at a time) until `SendShards`, which sends its shard of each phase; records processed later (ones that
    were still on their way) go in batches again. `FlushRawRecords` and the end of `run` send
    any shard held too.
    """

    def __init__(self, *, service_id: str, endpoint: Endpoint, tokenizer: str | None, raw: RawSource,
                 out: Sink, tokenizer_loader: LoadTokenizer = load_tokenizer,
                 raw_path: Path | None = None, batch_records: int = MAX_RECORDS,
                 batch_delay_s: float = MAX_DELAY_S, trace: bool = False,
                 shards: ShardBuilder | None = None) -> None:
        self.service_id = service_id
        self._trace = trace
        self._endpoint, self._tokenizer_name = endpoint, tokenizer
        self._raw, self._load = raw, tokenizer_loader
        self._out = out
        self._batcher = RecordBatcher(out, max_records=batch_records, max_delay_s=batch_delay_s)
        self._shards = shards
        self._held: list[MetricRecord] = []  # for `shards`, handed over `batch_records` at a time
        self._batch_records = batch_records
        self._raw_path = raw_path
        self._raw_part: RawPartWriter | None = None
        self._raw_error = ""
        self._tokenizer: Tokenizer | None = None
        self._load_error: Exception | None = None
        self._loaded = anyio.Event()
        self._load_started = False
        self._ready = anyio.Event()
        self.processed = 0

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`ProfileConfigure`: answered once the tokenizer is loaded (in a worker thread) and the
        raw part (if any) is open. `FlushRawRecords`: see `_flush_raw`. `SendShards`: see
        `_send_shards`. Raises `UserError` (the tokenizer's one-line message) for a bad
        `--tokenizer`, `GiveUp` when the raw part cannot be created, and `UnknownCommand` for any
        other command."""
        if isinstance(command, FlushRawRecords):
            return await self._flush_raw()
        if isinstance(command, SendShards):
            return await self._send_shards()
        if not isinstance(command, ProfileConfigure):
            raise UnknownCommand(f"the record-processor does not handle {type(command).__name__}")
        if self._raw_path is not None and self._raw_part is None:
            try:
                self._raw_path.parent.mkdir(parents=True, exist_ok=True)
                self._raw_part = RawPartWriter(self._raw_path)
            except OSError as exc:
                raise GiveUp(f"cannot create the raw records file {self._raw_path}: {exc.strerror or exc}") from exc
        if not self._load_started:
            await self._load_tokenizer(self._tokenizer_name)
        await self._loaded.wait()
        if self._load_error is not None:
            raise self._load_error
        assert self._tokenizer is not None
        self._ready.set()
        log.info("record_processor.configured", tokenizer=self._tokenizer.name)
        return None

    async def _load_tokenizer(self, spec: str | None) -> None:
        """Load the tokenizer in a worker thread, started with the service so the load
        overlaps the rest of start-up; `handle` reports a failure."""
        self._load_started = True
        try:
            self._tokenizer = await anyio.to_thread.run_sync(self._load, spec)
        except TokenizerError as exc:
            self._load_error = UserError(str(exc))
        finally:
            self._loaded.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once (the tokenizer loads meanwhile); processes records until cancelled,
        then sends the records of the current batch (bounded by `SHUTDOWN_FLUSH_S`).
        An undecodable frame is logged and skipped."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._load_tokenizer, self._tokenizer_name)
                tg.start_soon(self._batcher.run)
                task_status.started()
                recv = self._raw.recv
                while True:
                    try:
                        record = await recv()
                    except BadMessage as exc:
                        log.warning("record_processor.bad_message", channel=exc.channel, reason=exc.reason)
                        continue
                    if not self._ready.is_set():
                        await self._ready.wait()
                    if self._raw_part is not None:
                        self._write_raw(record)
                    if self._shards is not None:
                        self._held.append(self.process(record))
                        if len(self._held) >= self._batch_records:  # the aggregator takes a batch 3x cheaper
                            self._shards.add_batch(self._held)
                            self._held = []
                    else:
                        await self._batcher.add(self.process(record))
        finally:
            with anyio.move_on_after(SHUTDOWN_FLUSH_S, shield=True):
                await self._flush()

    async def _flush(self) -> ShardsSent:
        """Send what is held: the shard of each phase (then no more shards: later records go
        in batches) and the current batch."""
        shards, self._shards = self._shards, None
        sent = ShardsSent()
        if shards is not None:
            shards.add_batch(self._held)
            self._held = []
            for phase in list(shards.pending):
                shard = shards.take(phase)
                if shard is not None:
                    await self._out.send(shard)
                    sent = ShardsSent(shards=sent.shards + 1, records=sent.records + shard.records)
        await self._batcher.flush()
        return sent

    async def _send_shards(self) -> ShardsSent:
        """Queue one `MetricShard` per phase held on `out` and answer how many and for how many
        records (none without sharded aggregation). The records processed from then on go in
        batches: they were on their way when the controller asked (docs/run-protocol.md)."""
        sent = await self._flush()
        log.info("record_processor.shards_sent", shards=sent.shards, records=sent.records)
        return sent

    def _write_raw(self, record: RequestRecord) -> None:
        """Append `record` to the raw part; after a failed write the part is dropped and
        `FlushRawRecords` fails naming the reason (a cut line must not pass for an export)."""
        assert self._raw_part is not None
        try:
            self._raw_part.write(record)
        except OSError as exc:
            self._raw_error = f"{self._raw_part.path}: {exc.strerror or exc}"
            log.error("record_processor.raw_write_failed", error=self._raw_error)
            self._raw_part.discard()
            self._raw_part = None

    async def _flush_raw(self) -> RawRecordsFlushed:
        """Publish the raw part: flushed, fsynced, renamed from its staging name; the reply
        names it with its size and line count (an empty reply without `--export-level raw`).
        Records arriving later are not written. The metric records of the current batch are
        sent first (and any shard still held). Raises `GiveUp` when a write or the publication
        failed."""
        await self._flush()
        part, self._raw_part = self._raw_part, None
        if self._raw_error:
            raise GiveUp(f"raw records not written: {self._raw_error}")
        if part is None:
            return RawRecordsFlushed()
        try:
            size = await anyio.to_thread.run_sync(part.commit)
        except OSError as exc:
            raise GiveUp(f"raw records not written: {part.path}: {exc.strerror or exc}") from exc
        log.info("record_processor.raw_flushed", path=str(part.path), size=size, records=part.count)
        return RawRecordsFlushed(path=str(part.path), size=size, records=part.count)

    def process(self, record: RequestRecord) -> MetricRecord:
        """The `MetricRecord` of `record` (pure CPU; never raises: a failure to process becomes
        a `RecordProcessingError` on the result), carrying the record's `client_load` on, and
        with `trace` its HTTP trace in AIPerf's export shape (`trace_data`).
        Requires the tokenizer to be loaded."""
        out = self._metrics(record)
        if record.client_load is not None:
            out = msgspec.structs.replace(out, client_load=record.client_load)
        if self._trace and record.http is not None:
            out = msgspec.structs.replace(out, trace_data=trace_data(record))
        return out

    def _metrics(self, record: RequestRecord) -> MetricRecord:
        endpoint, tokenizer = self._endpoint, self._tokenizer
        assert tokenizer is not None
        self.processed += 1
        try:
            parsed = parse_response(endpoint.type, record.streaming, record)
            return compute_metrics(record, parsed, count_tokens=tokenizer.count,
                                   processor_id=self.service_id,
                                   use_server_token_count=endpoint.use_server_token_count)
        except Exception as exc:  # a bug in parsing must not lose the record
            log.error("record_processor.failed", num=record.credit_num, worker=record.worker_id,
                      error=f"{type(exc).__name__}: {exc}")
            return MetricRecord(
                phase=record.phase, credit_num=record.credit_num, worker_id=record.worker_id,
                conversation_id=record.conversation_id, turn_index=record.turn_index,
                start_wall_ns=record.start_wall_ns, cancelled=record.cancelled,
                error=ErrorDetails(type="RecordProcessingError", message=f"{type(exc).__name__}: {exc}"),
                processor_id=self.service_id)
