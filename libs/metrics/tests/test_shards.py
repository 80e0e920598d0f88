"""Sharded aggregation: `Aggregator.merge` of the shards of a record stream's parts gives the
summary of one aggregator fed the whole stream (`docs/scale.md`, "Shard aggregation")."""

from __future__ import annotations

import math
import random
from collections import Counter

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.messages import (
    AggregateShard,
    ColumnBytes,
    ErrorDetails,
    MetricRecord,
    MetricShard,
    Phase,
    RecordChannel,
)
from aiperf.metrics import Aggregator, MetricStats, Summary
from aiperf.metrics.catalog import spec_of

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
_TAGS = ("request_latency", "time_to_first_token", "output_sequence_length", "input_sequence_length",
         "requested_osl", "not_a_cataloged_tag")
_ORDER_STATS = ("min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "count")

_values = st.one_of(st.integers(0, 2**33), st.floats(-1e13, 1e13),
                    st.sampled_from([0.5, 64.0, 4294967295.0, 4294967296.0, -0.0]))
_icl = st.one_of(st.lists(st.integers(0, 50 * MS), max_size=8), st.lists(_values, max_size=4),
                 st.integers(1, 5 * MS).map(lambda g: [g] * 63))
_metrics = st.dictionaries(st.sampled_from(_TAGS), _values, max_size=len(_TAGS)).flatmap(
    lambda m: st.one_of(st.just(m), _icl.map(lambda icl: {**m, "inter_chunk_latency": icl})))


@st.composite
def _record(draw: st.DrawFn) -> MetricRecord:
    n = draw(st.integers(0, 10**6))
    kind = draw(st.sampled_from(["ok"] * 6 + ["error", "cancelled"]))
    start = draw(st.sampled_from([0, T0])) or draw(st.integers(T0, T0 + 10**10))
    metrics = draw(_metrics)
    if kind == "error" and draw(st.booleans()):
        metrics = {**metrics, "error_isl": draw(st.integers(1, 5000))}
    return MetricRecord(
        phase=draw(st.sampled_from([Phase.PROFILING] * 5 + [Phase.WARMUP])), credit_num=n, worker_id="w",
        conversation_id="c", start_wall_ns=start, end_wall_ns=start + draw(st.integers(0, 10**10)) if start else 0,
        metrics=metrics, error=ErrorDetails(code=500, type="e", message=str(n % 3)) if kind == "error" else None,
        cancelled=kind == "cancelled")


def _wire(agg: Aggregator) -> AggregateShard:
    """`agg`'s shard after a trip through the records channel's codec, as the records-manager gets it."""
    message = MetricShard(phase=Phase.PROFILING, records=agg.record_count, shard=agg.shard())
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(message), type=RecordChannel)
    assert isinstance(decoded, MetricShard)
    return decoded.shard


def _summary(agg: Aggregator) -> Summary:
    with np.errstate(all="ignore"):
        return agg.summary(benchmark_duration_s=2.0, goodput={"time_to_first_token": 1.0})


def _state(agg: Aggregator) -> tuple:
    """Everything `add` leaves: each column's type and values, the rows, counters and errors."""
    columns = {(kind, tag): (col.data.typecode, col.values().tobytes())
               for kind, cols in (("scalar", agg._scalars), ("list", agg._lists)) for tag, col in cols.items()}
    rows = tuple(bytes(getattr(agg._rows, name)) for name in agg._rows.__slots__)
    return (columns, rows, agg.warmup_count, agg.record_count, agg.observed_duration_s(),
            list(agg._errors.items()), bytes(agg._error_isl), repr(_summary(agg)))


def _fed(records: list[MetricRecord]) -> Aggregator:
    agg = Aggregator()
    agg.add_batch(records)
    return agg


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_record(), max_size=40), cuts=st.lists(st.integers(0, 40), max_size=6))
def test_the_shards_of_consecutive_parts_merged_in_order_are_the_whole_stream_bit_for_bit(
        records: list[MetricRecord], cuts: list[int]) -> None:
    bounds = [0, *sorted(c for c in cuts if c <= len(records)), len(records)]
    merged = Aggregator()
    for a, b in zip(bounds, bounds[1:], strict=False):
        merged.merge(_wire(_fed(records[a:b])))
    assert _state(merged) == _state(_fed(records))


def _close(a: float | int | None, b: float | int | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return a is b or (a != a and b != b)  # noqa: PLR0124  (NaN == NaN)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _assert_same(merged: Summary, whole: Summary) -> None:
    """Order statistics and counts bit for bit; float sums (avg, sum, std, time-weighted curves)
    to within their summation order's rounding."""
    assert (merged.request_count, merged.error_request_count, merged.cancelled_request_count,
            merged.good_request_count, merged.benchmark_duration_s) == (
        whole.request_count, whole.error_request_count, whole.cancelled_request_count,
        whole.good_request_count, whole.benchmark_duration_s)
    assert Counter(dict(merged.errors)) == Counter(dict(whole.errors))
    for part in ("metrics", "extras"):
        m, w = getattr(merged, part), getattr(whole, part)
        assert m.keys() == w.keys()
        for tag, ws in w.items():
            ms: MetricStats = m[tag]
            exact = ws.is_distribution  # a record metric: its order statistics are exact
            for key in ("avg", "sum", "std", *_ORDER_STATS):
                a, b = ms.stat(key), ws.stat(key)
                if exact and key in _ORDER_STATS:  # equal floats (min of 0.0 and -0.0: either)
                    assert a == b, (tag, key, a, b)
                else:
                    assert _close(a, b), (tag, key, a, b)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_record(), max_size=40), k=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_the_shards_of_any_partition_merged_in_any_order_give_the_same_summary(
        records: list[MetricRecord], k: int, seed: int) -> None:
    rng = random.Random(seed)
    parts: list[list[MetricRecord]] = [[] for _ in range(k)]
    for r in records:
        parts[rng.randrange(k)].append(r)
    rng.shuffle(parts)
    merged = Aggregator()
    for part in parts:
        merged.merge(_wire(_fed(part)))
    assert merged.record_count == _fed(records).record_count
    _assert_same(_summary(merged), _summary(_fed(records)))


def test_percentiles_of_many_shards_are_numpys_over_the_concatenated_values() -> None:
    rng = np.random.default_rng(7)
    shards, ttft, icl = [], [], []
    for s in range(20):
        records = []
        for i in range(50):
            t = int(rng.integers(1, 200 * MS))
            gaps = [int(g) for g in rng.integers(1, 10 * MS, 63)]
            ttft.append(t)
            icl += gaps
            records.append(MetricRecord(phase=Phase.PROFILING, credit_num=s * 50 + i, worker_id="w",
                                        conversation_id="c", start_wall_ns=T0 + i * MS, end_wall_ns=T0 + i * MS + t + sum(gaps),
                                        metrics={"time_to_first_token": t, "inter_chunk_latency": gaps,
                                                 "output_sequence_length": 64}))
        shards.append(_wire(_fed(records)))
    merged = Aggregator()
    for shard in shards:
        merged.merge(shard)
    summary = _summary(merged)
    for tag, values in (("time_to_first_token", ttft), ("inter_chunk_latency", icl)):
        want = np.percentile(np.asarray(values, np.float64) * spec_of(tag).scale, [1, 50, 99])  # display units
        got = [summary.metrics[tag].stat(k) for k in ("p1", "p50", "p99")]
        assert [repr(float(x)) for x in want] == [repr(x) for x in got]
        assert summary.metrics[tag].count == len(values)


@pytest.mark.parametrize("bad", [
    AggregateShard(success_count=1, scalars={"request_latency": ColumnBytes(typecode="q", data=b"\0" * 8)}),
    AggregateShard(success_count=1, scalars={"request_latency": ColumnBytes(typecode="d", data=b"\0" * 7)}),
    AggregateShard(success_count=0, scalars={"request_latency": ColumnBytes(typecode="I", data=b"\0" * 4)}),
    AggregateShard(success_count=1, row_start=b"\0" * 8),
    AggregateShard(success_count=1, lists={"inter_chunk_latency": ColumnBytes(typecode="I", data=b"\0" * 4)}),
    AggregateShard(success_count=-1),
])
def test_a_malformed_shard_is_refused_and_leaves_the_aggregator_as_it_was(bad: AggregateShard) -> None:
    agg = _fed([MetricRecord(phase=Phase.PROFILING, credit_num=1, worker_id="w", conversation_id="c",
                             start_wall_ns=T0, end_wall_ns=T0 + MS, metrics={"request_latency": MS})])
    before = _state(agg)
    with pytest.raises(ValueError, match="shard"):
        agg.merge(bad)
    assert _state(agg) == before


def test_a_shard_builder_hands_out_each_phase_once_with_its_counts_and_lines() -> None:
    from aiperf.metrics import ShardBuilder, record_lines

    ok = [MetricRecord(phase=Phase.PROFILING, credit_num=i, worker_id="w", conversation_id="c",
                       start_wall_ns=T0 + i, end_wall_ns=T0 + i + MS, metrics={"request_latency": MS + i},
                       metadata={"request_start_ns": T0 - 5 + i}) for i in range(5)]
    warm = [MetricRecord(phase=Phase.WARMUP, credit_num=9, worker_id="w", conversation_id="c")]
    failed = [MetricRecord(phase=Phase.PROFILING, credit_num=7, worker_id="w", conversation_id="c",
                           error=ErrorDetails(code=500, type="e", message="x"), response_error=True)]
    stream = ok[:2] + warm + ok[2:] + failed
    builder = ShardBuilder(jsonl=True)
    builder.add_batch(stream)
    assert builder.pending == {Phase.PROFILING: 6, Phase.WARMUP: 1}
    prof = builder.take(Phase.PROFILING)
    assert prof is not None and builder.take(Phase.PROFILING) is None
    assert (prof.records, prof.errors, prof.response_errors, prof.first_start_wall_ns) == (6, 1, 1, T0 - 5)
    assert prof.jsonl == record_lines(ok[:2]) + record_lines(ok[2:] + failed)
    warmup = builder.take(Phase.WARMUP)
    assert warmup is not None and warmup.shard.warmup == 1 and builder.pending == {}
    merged = Aggregator()
    merged.merge(prof.shard)
    merged.merge(warmup.shard)
    assert _state(merged) == _state(_fed(ok + failed + warm))
