"""Sharded aggregation on the wire: a record-processor's aggregated state of one phase, sent
once instead of its records (`docs/scale.md`, "Shard aggregation").

Every per-request value travels as a typed column of raw bytes (numpy-ready, little-endian),
so encoding and decoding cost per column, not per value. The receiver merges a shard into its
own aggregator (`aiperf.metrics.Aggregator.merge`) and counts `MetricShard.records` as if the
records had come one by one.
"""

from __future__ import annotations

import msgspec

from aiperf.messages.base import Message, Phase
from aiperf.messages.load import ClientLoad
from aiperf.messages.records import ErrorDetails, MetricRecordBatch


class ColumnBytes(msgspec.Struct, frozen=True, array_like=True):
    """One typed column: `data` holds the values in native machine order as `typecode` says
    (`"I"`: uint32, `"d"`: float64, `"q"`: int64; Python `array` typecodes)."""

    typecode: str
    data: bytes


class AggregateShard(msgspec.Struct, frozen=True, kw_only=True):
    """The whole state of an `Aggregator` (see there for what each part means).

    `success_count` successful profiling requests; `scalars[tag]` holds the values of a scalar
    metric for successes 0..len-1 (a shorter column: NaN for the rest, as the aggregator pads
    lazily); `lists[tag]` a list metric's values, flattened in success order. The six `row_*`
    columns are the per-request numbers of the sweep metrics (`start`, `first`, `end`: int64
    wall ns, -1 when unknown; `isl`, `osl`: float64; `icl_count`: int64). `errors` is the error
    counter in first-seen order; `min_start_wall_ns` / `max_end_wall_ns` are None when no
    record had one."""

    success_count: int = 0
    scalars: dict[str, ColumnBytes] = {}
    lists: dict[str, ColumnBytes] = {}
    row_start: bytes = b""
    row_first: bytes = b""
    row_end: bytes = b""
    row_isl: bytes = b""
    row_osl: bytes = b""
    row_icl_count: bytes = b""
    error_isl: bytes = b""
    errors: list[tuple[ErrorDetails, int]] = []
    cancelled: int = 0
    warmup: int = 0
    min_start_wall_ns: int | None = None
    max_end_wall_ns: int | None = None


class MetricShard(Message, frozen=True, kw_only=True):
    """`records` metric records of `phase`, aggregated by one record-processor: the records-manager
    merges `shard` into its aggregator and counts them for progress and for the phase's
    accounting exactly as if they had come in `MetricRecordBatch`es.

    `errors` of them failed, `response_errors` of those with an error in the response itself
    (see `MetricRecord.response_error`); `first_start_wall_ns` is the earliest request start
    among them (0: none); `client_loads` the newest `ClientLoad` per worker seen among them.
    `jsonl` holds their `profile_export.jsonl` lines already rendered (empty when the run does
    not export records), appended by the records-manager as they are."""

    phase: Phase
    records: int
    shard: AggregateShard
    errors: int = 0
    response_errors: int = 0
    first_start_wall_ns: int = 0
    client_loads: dict[str, ClientLoad] = {}
    jsonl: bytes = b""


RecordChannel = MetricRecordBatch | MetricShard
"""The `records` channel (record-processors -> records-manager): batches of records, or shards."""
