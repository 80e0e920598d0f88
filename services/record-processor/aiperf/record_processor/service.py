"""Parses raw records and computes per-request metrics.

One `MetricRecord` goes out for every `RequestRecord` that comes in, in arrival order, even
when parsing fails (the record then carries a `RecordProcessingError`), so the
records-manager's count of records per returned credit always balances.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.comms import BadMessage
from aiperf.config import Endpoint
from aiperf.endpoints import parse_response
from aiperf.messages import Command, ErrorDetails, MetricRecord, ProfileConfigure, Reply, RequestRecord
from aiperf.metrics import compute_metrics
from aiperf.runtime import UnknownCommand, UserError
from aiperf.tokenizer import Tokenizer, TokenizerError, load_tokenizer

log = structlog.get_logger("aiperf.record_processor")


class RawSource(Protocol):
    """Where raw records come from (a `PullSocket` in production); may raise `BadMessage`."""

    async def recv(self) -> RequestRecord: ...


class Sink(Protocol):
    """Where metric records go (a `PushSocket` in production)."""

    async def send(self, message: object) -> None: ...


LoadTokenizer = Callable[[str | None], Tokenizer]


class RecordProcessor:
    """Turns each `RequestRecord` into a `MetricRecord`, one at a time, parsing responses of
    `endpoint` and counting tokens with `tokenizer` (a tokenizer.json path; None: bundled).

    The tokenizer loads as soon as the service runs; records that arrive before
    `ProfileConfigure` confirmed it loaded wait for it. Must be constructed inside the event loop.
    """

    def __init__(self, *, service_id: str, endpoint: Endpoint, tokenizer: str | None, raw: RawSource,
                 out: Sink, tokenizer_loader: LoadTokenizer = load_tokenizer) -> None:
        self.service_id = service_id
        self._endpoint, self._tokenizer_name = endpoint, tokenizer
        self._raw, self._out, self._load = raw, out, tokenizer_loader
        self._tokenizer: Tokenizer | None = None
        self._load_error: Exception | None = None
        self._loaded = anyio.Event()
        self._load_started = False
        self._ready = anyio.Event()
        self.processed = 0

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`ProfileConfigure`: answered once the tokenizer is loaded (in a worker thread).
        Raises `UserError` (the tokenizer's one-line message) for a bad `--tokenizer` and
        `UnknownCommand` for any other command."""
        if not isinstance(command, ProfileConfigure):
            raise UnknownCommand(f"the record-processor does not handle {type(command).__name__}")
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
        """Ready at once (the tokenizer loads meanwhile); processes records until cancelled.
        An undecodable frame is logged and skipped."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._load_tokenizer, self._tokenizer_name)
            task_status.started()
            recv, send = self._raw.recv, self._out.send
            while True:
                try:
                    record = await recv()
                except BadMessage as exc:
                    log.warning("record_processor.bad_message", channel=exc.channel, reason=exc.reason)
                    continue
                if not self._ready.is_set():
                    await self._ready.wait()
                await send(self.process(record))

    def process(self, record: RequestRecord) -> MetricRecord:
        """The `MetricRecord` of `record` (pure CPU; never raises: a failure to process becomes
        a `RecordProcessingError` on the result). Requires the tokenizer to be loaded."""
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
