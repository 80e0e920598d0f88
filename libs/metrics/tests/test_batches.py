"""A batch is taken as its records one by one: `Aggregator.add_batch` leaves the state that `add`
on each leaves, and `JsonlRecordWriter.write_many` writes the bytes of `write` on each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiperf.messages import ErrorDetails, MetricRecord, Phase
from aiperf.metrics import Aggregator, JsonlRecordWriter

MS = 1_000_000
_TAGS = ("request_latency", "time_to_first_token", "output_sequence_length", "input_sequence_length",
         "requested_osl", "not_a_cataloged_tag")
"""Times (ms display), tokens (int when whole), an internal tag and an unknown one."""

_values = st.one_of(st.integers(0, 2**33), st.floats(-1e13, 1e13),  # a NaN value: only as a missing tag (a NaN TTFT has no row)
                    st.sampled_from([0.5, 64.0, 4294967295.0, 4294967296.0, -0.0]))
_metrics = st.dictionaries(st.sampled_from(_TAGS), _values, max_size=len(_TAGS)).flatmap(
    lambda m: st.one_of(st.just(m), st.lists(_values, max_size=5).map(
        lambda icl: {**m, "inter_chunk_latency": icl})))
_records = st.builds(
    lambda phase, kind, metrics, start, dur, n: MetricRecord(
        phase=phase, credit_num=n, worker_id="w", conversation_id="c", start_wall_ns=start,
        end_wall_ns=start + dur if start else 0, metrics=metrics,
        metadata={"x_request_id": f"r{n}", "gone": None},
        error=ErrorDetails(code=500, type="e", message=str(n % 2)) if kind == "error" else None,
        cancelled=kind == "cancelled"),
    st.sampled_from([Phase.PROFILING] * 5 + [Phase.WARMUP]),
    st.sampled_from(["ok"] * 6 + ["error", "cancelled"]),
    _metrics, st.sampled_from([0, 1_700_000_000 * 10**9]), st.integers(0, 10**10), st.integers(0, 99))
_LIKE = {"request_latency": 90.0 * MS, "output_sequence_length": 64.0, "inter_chunk_latency": [1.0 * MS] * 3}
"""Successes with the same tags: the runs `add_batch` takes tag by tag."""


def _state(agg: Aggregator) -> tuple:
    """Everything `add` leaves: each column's type and values, the rows, counters and errors."""
    columns = {(kind, tag): (col.data.typecode, col.values().tobytes())
               for kind, cols in (("scalar", agg._scalars), ("list", agg._lists)) for tag, col in cols.items()}
    rows = tuple(bytes(getattr(agg._rows, name)) for name in _ROW_FIELDS)
    summary = agg.summary(benchmark_duration_s=2.0, goodput={"time_to_first_token": 1.0})
    return (columns, rows, agg.warmup_count, agg.record_count, agg.observed_duration_s(),
            list(agg._errors.items()), bytes(agg._error_isl), repr(summary))


_ROW_FIELDS = ("start", "first", "end", "isl", "osl", "icl_count")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.one_of(_records, _records.map(lambda r: MetricRecord(
           phase=Phase.PROFILING, credit_num=r.credit_num, worker_id="w", conversation_id="c",
           start_wall_ns=r.start_wall_ns, end_wall_ns=r.end_wall_ns, metrics=dict(_LIKE)))), max_size=40),
       cuts=st.lists(st.integers(0, 40), max_size=6))
def test_a_batch_is_taken_as_its_records_one_by_one(records: list[MetricRecord], cuts: list[int],
                                                    tmp_path: Path) -> None:
    bounds = [0, *sorted(c for c in cuts if c <= len(records)), len(records)]
    batches = [records[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    one, many = Aggregator(), Aggregator()
    with JsonlRecordWriter(tmp_path / "one.jsonl") as w1, JsonlRecordWriter(tmp_path / "many.jsonl") as w2:
        for r in records:
            one.add(r)
            w1.write(r)
        for batch in batches:
            many.add_batch(batch)
            w2.write_many(batch)
        assert w1.count == w2.count == len(records)
    with np.errstate(all="ignore"):
        assert _state(many) == _state(one)
    assert (tmp_path / "many.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
