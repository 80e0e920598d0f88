"""Aggregator: exact stats equal numpy's, phases, errors, derived metrics and goodput."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiperf.messages import ErrorDetails, MetricRecord, Phase
from aiperf.metrics import Aggregator

MS = 1_000_000


def _rec(phase: Phase = Phase.PROFILING, error: ErrorDetails | None = None, cancelled: bool = False,
         **metrics: float | list[float]) -> MetricRecord:
    return MetricRecord(phase=phase, credit_num=0, worker_id="w", conversation_id="c", metrics=metrics,
                        error=error, cancelled=cancelled)


@settings(max_examples=150, deadline=None)
@example(values=[994414407206.0, 994414465863.0], icl=[[]])  # large mean, tiny spread: std cancels
@given(values=st.lists(st.floats(0, 1e12, allow_nan=False), min_size=1, max_size=200),
       icl=st.lists(st.lists(st.integers(0, 10**9), max_size=6), min_size=1, max_size=20))
def test_stats_equal_numpy(values: list[float], icl: list[list[int]]) -> None:
    agg = Aggregator()
    for v in values:
        agg.add(_rec(request_latency=v))
    for gaps in icl:
        agg.add(_rec(inter_chunk_latency=[float(g) for g in gaps]))
    s = agg.summary(benchmark_duration_s=1.0)
    for tag, raw in (("request_latency", values), ("inter_chunk_latency", [g for gs in icl for g in gs])):
        if not raw:
            assert s.get(tag) is None
            continue
        arr = np.asarray(raw, dtype=np.float64) / MS
        st_ = s.metrics[tag]
        assert st_.count == arr.size
        for key, expected in [("avg", np.mean(arr)), ("min", arr.min()), ("max", arr.max()),
                              ("sum", arr.sum()), ("std", np.std(arr))] + [
                (f"p{p}", np.percentile(arr, p)) for p in (1, 5, 10, 25, 50, 75, 90, 95, 99)]:
            got = st_.stat(key)
            # std cancels: an ulp of unit-conversion rounding per value (we scale by 1e-6,
            # the reference divides by 1e6) moves it by ~1e-16 * max|x|, whatever its size.
            abs_tol = 1e-12 * float(np.abs(arr).max()) if key == "std" else 1e-12
            assert got is not None and math.isclose(got, float(expected), rel_tol=1e-9, abs_tol=abs_tol), \
                (tag, key, got, expected)


def test_warmup_excluded_and_derived() -> None:
    agg = Aggregator()
    agg.add(_rec(Phase.WARMUP, request_latency=1e12, output_sequence_length=1000, input_sequence_length=1))
    for i in range(4):
        agg.add(_rec(request_latency=(10 + i) * MS, output_sequence_length=10, input_sequence_length=100,
                     output_token_count=10))
    err = ErrorDetails(type="Internal Server Error", message="boom", code=500)
    agg.add(_rec(error=err, error_isl=100))
    agg.add(_rec(error=err, error_isl=50))
    agg.add(_rec(cancelled=True))
    s = agg.summary(benchmark_duration_s=2.0)
    assert agg.warmup_count == 1 and agg.record_count == 7
    assert s.request_count == 4 and s.error_request_count == 2 and s.cancelled_request_count == 1
    assert s.metrics["request_latency"].max == 13.0
    assert s.metrics["request_throughput"].avg == 2.0
    assert s.metrics["output_token_throughput"].avg == 20.0
    assert s.metrics["input_token_throughput"].avg == 200.0
    assert s.metrics["total_token_throughput"].avg == 220.0
    assert s.metrics["total_osl"].avg == 40 and s.metrics["total_isl"].avg == 400
    assert s.metrics["total_output_tokens"].avg == 40
    assert s.metrics["error_request_count"].avg == 2
    assert s.metrics["completed_request_count"].avg == 6
    assert s.metrics["error_isl"].avg == 75.0 and s.metrics["total_error_isl"].avg == 150
    assert s.metrics["benchmark_duration"].avg == 2.0
    assert s.errors == [(err, 2)]
    assert list(s.metrics)[:3] == ["request_throughput", "request_latency", "request_count"]


def test_no_error_request_count_when_zero_and_extras_apart() -> None:
    agg = Aggregator()
    agg.add(_rec(request_latency=MS, credit_to_send_delay=2 * MS, credit_to_start_latency=3 * MS))
    s = agg.summary(benchmark_duration_s=1.0)
    assert "error_request_count" not in s.metrics
    assert "credit_to_send_delay" in s.extras and "credit_to_send_delay" not in s.metrics
    assert "credit_to_start_latency" in s.metrics
    assert s.get("credit_to_send_delay") is not None and s.extras["credit_to_send_delay"].avg == 2.0


def test_goodput_distserve() -> None:
    agg = Aggregator()
    rows = [  # (latency ms, ITL ms, tokens/s/user)
        (100, 5, 200.0), (300, 5, 200.0), (100, 12, 83.0), (250, 10, 100.0), (90, None, None),
    ]
    for lat, itl, tps in rows:
        m: dict = {"request_latency": lat * MS}
        if itl is not None:
            m["inter_token_latency"] = itl * MS
            m["output_token_throughput_per_user"] = tps
        agg.add(_rec(**m))
    agg.add(_rec(error=ErrorDetails(type="x", message="y")))
    s = agg.summary(benchmark_duration_s=2.0, goodput={"request_latency": 250, "inter_token_latency": 10})
    assert s.good_request_count == 2  # rows 0 and 3 (row 4 lacks ITL: not good)
    assert s.metrics["goodput"].avg == 1.0 and s.metrics["good_request_count"].avg == 2
    s2 = agg.summary(benchmark_duration_s=1.0, goodput={"output_token_throughput_per_user": 100})
    assert s2.good_request_count == 3  # larger is better: 200, 200, 100
    assert agg.summary(benchmark_duration_s=1.0).good_request_count is None
    with pytest.raises(ValueError, match="not a per-request metric"):
        agg.summary(benchmark_duration_s=1.0, goodput={"request_throughput": 1})


def test_observed_duration_from_wall_times() -> None:
    agg = Aggregator()
    for start, end in ((5 * 10**9, 6 * 10**9), (4 * 10**9, 7 * 10**9)):
        agg.add(MetricRecord(phase=Phase.PROFILING, credit_num=0, worker_id="w", conversation_id="c",
                             start_wall_ns=start, end_wall_ns=end, metrics={"request_latency": 1.0}))
    assert agg.observed_duration_s() == 3.0
    assert Aggregator().observed_duration_s() == 0.0


def test_sparse_metrics_align_per_record() -> None:
    agg = Aggregator()
    agg.add(_rec(request_latency=1 * MS))
    agg.add(_rec(request_latency=2 * MS, inter_token_latency=5 * MS))
    agg.add(_rec(request_latency=3 * MS))
    np.testing.assert_array_equal(agg.column("inter_token_latency"), [np.nan, 5.0, np.nan])
    s = agg.summary(benchmark_duration_s=1.0, goodput={"inter_token_latency": 6})
    assert s.metrics["inter_token_latency"].count == 1 and s.good_request_count == 1


def test_error_rate_usage_totals_and_osl_mismatch_count() -> None:
    from aiperf.metrics import OslMismatchThresholds

    agg = Aggregator()
    # requested 100: allowed min(5, 50) = 5 tokens; requested 2000: allowed min(100, 50) = 50
    for requested, osl in ((100, 100), (100, 95), (100, 94), (2000, 1951), (2000, 1949)):
        agg.add(_rec(request_latency=MS, output_sequence_length=osl, requested_osl=requested,
                     usage_prompt_tokens=10, usage_completion_tokens=osl, usage_total_tokens=10 + osl))
    agg.add(_rec(request_latency=MS, output_sequence_length=3))  # nothing requested
    agg.add(_rec(error=ErrorDetails(type="x", message="y"), error_isl=5))
    agg.add(_rec(cancelled=True))
    s = agg.summary(benchmark_duration_s=1.0)
    assert s.metrics["request_error_rate"].avg == pytest.approx(100 / 7)
    assert s.metrics["request_error_rate"].unit == "%"
    assert s.metrics["osl_mismatch_count"].avg == 2
    assert "requested_osl" not in s.metrics and "requested_osl" not in s.extras
    assert s.metrics["total_usage_prompt_tokens"].avg == 50
    assert s.metrics["total_usage_completion_tokens"].avg == 100 + 95 + 94 + 1951 + 1949
    assert s.metrics["total_usage_total_tokens"].avg == 50 + 100 + 95 + 94 + 1951 + 1949
    assert "total_usage_reasoning_tokens" not in s.metrics
    loose = agg.summary(benchmark_duration_s=1.0, osl_mismatch=OslMismatchThresholds(pct=10, max_tokens=60))
    assert loose.metrics["osl_mismatch_count"].avg == 0
    assert "osl_mismatch_count" not in Aggregator().summary(benchmark_duration_s=1.0).metrics


def test_all_errors_is_a_full_error_rate_and_sweeps_count_failed_requests() -> None:
    agg = Aggregator()
    for start in (0, 5):
        agg.add(MetricRecord(phase=Phase.PROFILING, credit_num=0, worker_id="w", conversation_id="c",
                             start_wall_ns=10**18 + start * MS, end_wall_ns=10**18 + (start + 10) * MS,
                             error=ErrorDetails(type="x", message="y")))
    s = agg.summary(benchmark_duration_s=1.0)
    assert s.metrics["request_error_rate"].avg == 100.0
    conc = s.metrics["effective_concurrency"]
    assert conc.avg == pytest.approx(20 / 15) and conc.max == 2 and conc.count is None and conc.sum is None
    assert s.metrics["effective_decode_throughput"].avg == 0.0


def test_sweep_metrics_from_records_use_ttft_and_chunk_gaps() -> None:
    agg = Aggregator()
    base = 1_700_000_000 * 10**9
    for user in range(2):
        for i in range(3):
            start = base + (user * 7 + i * 100) * MS
            agg.add(MetricRecord(
                phase=Phase.PROFILING, credit_num=i, worker_id="w", conversation_id="c",
                start_wall_ns=start, end_wall_ns=start + 100 * MS,
                metrics={"time_to_first_token": 20 * MS, "input_sequence_length": 10,
                         "output_sequence_length": 9, "inter_chunk_latency": [10.0 * MS] * 8}))
    s = agg.summary(benchmark_duration_s=1.0)
    window = 307
    assert s.metrics["effective_concurrency"].avg == pytest.approx(600 / window)
    assert s.metrics["effective_decode_concurrency"].avg == pytest.approx(6 * 80 / window)
    # 8 tokens after the first over 8 chunk gaps of 10 ms (the last chunk at 100 ms = end)
    assert s.metrics["active_decode_throughput_per_user"].avg == pytest.approx(100.0)
    assert s.metrics["effective_prefill_throughput_per_user"].max == pytest.approx(500.0)
    for tag in ("effective_concurrency", "tokens_in_flight", "active_total_throughput"):
        st_ = s.metrics[tag]
        assert st_.has_percentiles and not st_.is_distribution and st_.p1 is None
