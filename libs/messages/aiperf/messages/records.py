"""The `raw_records` channel (worker PUSH -> record-processor PULL) and the `records` channel
(record-processor PUSH -> records-manager PULL, metric records in batches).

Workers do as little as possible: they record raw response bytes with the
`time.perf_counter_ns()` of each network read. Record-processors parse and compute metrics.
"""

from __future__ import annotations

from typing import Any

import msgspec

from aiperf.messages.base import Message, Phase
from aiperf.messages.load import ClientLoad


class ErrorDetails(Message, frozen=True, kw_only=True):
    """What went wrong with one request. `code` is the HTTP status when there was one."""

    type: str
    message: str
    code: int | None = None


class HttpTrace(msgspec.Struct, frozen=True, kw_only=True):
    """Where one request's bytes moved, as the worker's HTTP client saw them (k6-style phases).

    Every `*_ns` is `perf_counter_ns()` of the worker's host; 0 means "did not happen" (no
    pool wait, no DNS lookup, a reused connection was not connected). `send_*` are the first
    and last writes of this request to the connection's transport, `recv_*` the first and last
    reads from it; `sent_bytes`/`recv_bytes` count what went through them (status line,
    headers and body, chunked framing included) in `writes`/`reads` calls. `retries`: times the
    request was sent again on a new connection because the server closed a reused one before
    any byte of the response (`retry_reason` says how); the fields above describe the last
    attempt, whose send is the request's start.
    """

    reused: bool = False
    pool_wait_start_ns: int = 0
    pool_wait_end_ns: int = 0
    dns_start_ns: int = 0
    dns_end_ns: int = 0
    connect_start_ns: int = 0
    connected_ns: int = 0
    send_start_ns: int = 0
    send_end_ns: int = 0
    recv_first_ns: int = 0
    recv_last_ns: int = 0
    sent_bytes: int = 0
    recv_bytes: int = 0
    writes: int = 0
    reads: int = 0
    retries: int = 0
    retry_reason: str = ""


class RequestRecord(Message, frozen=True, kw_only=True):
    """Everything a worker observed about one request.

    `chunk_ns[i]` is when `chunks[i]` (the bytes of one network read) arrived. All `*_ns`
    values are `perf_counter_ns()` of the worker's host, except `start_wall_ns`
    (`time.time_ns()`, for exports). `clock_offset_ns` maps the timing-manager's clock to
    this host's (Kubernetes mode; 0 locally). `requested_output_tokens` is the output limit
    the request asked for (`max_tokens`; None: none sent). `http` is the wire-level trace of
    the exchange (None: the client does not trace, or the request never left).
    """

    worker_id: str
    phase: Phase
    credit_num: int
    conversation_id: str
    turn_index: int = 0
    model: str = ""
    endpoint: str = ""
    streaming: bool = False
    input_tokens: int | None = None
    credit_issued_ns: int = 0
    scheduled_ns: int = 0
    credit_received_ns: int = 0
    start_ns: int = 0
    start_wall_ns: int = 0
    response_headers_ns: int = 0
    end_ns: int = 0
    status: int = 0
    chunk_ns: list[int] = []
    chunks: list[bytes] = []
    error: ErrorDetails | None = None
    cancelled: bool = False
    clock_offset_ns: int = 0
    x_request_id: str = ""
    requested_output_tokens: int | None = None
    http: HttpTrace | None = None
    client_load: ClientLoad | None = None
    """The worker's cumulative `ClientLoad`, on some records only (a few per second)."""


class MetricRecord(Message, frozen=True, kw_only=True):
    """Per-request metrics computed by a record-processor.

    `metrics` maps AIPerf metric tags (`time_to_first_token`, ...) to values in their base
    units (nanoseconds for times, tokens for counts); list-valued metrics
    (`inter_chunk_latency`) hold one value per gap.
    """

    phase: Phase
    credit_num: int
    worker_id: str
    conversation_id: str
    turn_index: int = 0
    start_wall_ns: int = 0
    end_wall_ns: int = 0
    metrics: dict[str, float | list[float]] = {}
    metadata: dict[str, str | int | float | bool | None] = {}
    error: ErrorDetails | None = None
    cancelled: bool = False
    processor_id: str = ""
    client_load: ClientLoad | None = None
    """Copied from the `RequestRecord` (see there)."""
    response_error: bool = False
    """The exchange itself succeeded (no transport error, status < 400: the worker returned the
    credit as ok) but the response holds an error or no content (`error` says which). The
    records-manager counts such a request as failed in the accounting, as the metrics do."""
    trace_data: dict[str, Any] | None = None
    """The request's HTTP trace in AIPerf's export shape (`aiperf.metrics.trace_export`), only
    when the run exports it (`artifacts.trace`); written into its profile_export.jsonl line."""


class MetricRecordBatch(Message, frozen=True, kw_only=True):
    """Consecutive `MetricRecord`s of one record-processor, in the order it made them: the
    `records` channel's message, so its per-message cost is paid once per batch. The receiver
    takes each record as if it had come alone."""

    records: list[MetricRecord]


RawRecordChannel = RequestRecord
