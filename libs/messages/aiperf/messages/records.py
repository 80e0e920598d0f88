"""The `raw_records` channel (worker PUSH -> record-processor PULL) and the `records` channel
(record-processor PUSH -> records-manager PULL).

Workers do as little as possible: they record raw response bytes with the
`time.perf_counter_ns()` of each network read. Record-processors parse and compute metrics.
"""

from __future__ import annotations

from aiperf.messages.base import Message, Phase


class ErrorDetails(Message, frozen=True, kw_only=True):
    """What went wrong with one request. `code` is the HTTP status when there was one."""

    type: str
    message: str
    code: int | None = None


class RequestRecord(Message, frozen=True, kw_only=True):
    """Everything a worker observed about one request.

    `chunk_ns[i]` is when `chunks[i]` (the bytes of one network read) arrived. All `*_ns`
    values are `perf_counter_ns()` of the worker's host, except `start_wall_ns`
    (`time.time_ns()`, for exports). `clock_offset_ns` maps the timing-manager's clock to
    this host's (Kubernetes mode; 0 locally).
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


RawRecordChannel = RequestRecord
RecordChannel = MetricRecord
