"""Parsing and statistics: exact values on hand-built scrapes, properties over arbitrary ones."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.servermetrics.parse import ExpositionError, HistogramValue, parse_metrics
from aiperf.servermetrics.stats import (
    bucket_quantile,
    counter_increase,
    counter_stats,
    gauge_stats,
    histogram_increase,
    histogram_stats,
    scrub_non_finite,
)

TEXT = """\
# HELP vllm:num_requests_running Running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3.0
# HELP vllm:generation_tokens_total Generated.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m"} 120.0
vllm:generation_tokens_created{model_name="m"} 1.7e9
# HELP lat Latency.
# TYPE lat histogram
lat_bucket{le="0.1"} 1.0
lat_bucket{le="0.5"} 3.0
lat_bucket{le="+Inf"} 4.0
lat_count 4.0
lat_sum 2.5
# TYPE s summary
s{quantile="0.5"} 1.0
s_count 1.0
s_sum 1.0
plain 7
"""


def test_parse_keeps_types_help_labels_and_histograms() -> None:
    fams = parse_metrics(TEXT)
    assert sorted(fams) == ["lat", "plain", "vllm:generation_tokens", "vllm:num_requests_running"]
    assert fams["vllm:generation_tokens"].kind == "counter"
    assert fams["vllm:generation_tokens"].series == {(("model_name", "m"),): 120.0}
    assert fams["vllm:num_requests_running"].description == "Running."
    assert fams["plain"].kind == "unknown"
    assert fams["lat"].series[()] == HistogramValue(((0.1, 1.0), (0.5, 3.0), (math.inf, 4.0)), 4.0, 2.5)


def test_text_that_is_not_prometheus_is_one_error() -> None:
    with pytest.raises(ExpositionError, match="not Prometheus"):
        parse_metrics("<html><body>hello</body></html>\n")


def test_counter_increase_counts_through_a_reset() -> None:
    assert counter_increase([10, 15, 3, 8]) == 5 + 3 + 5
    stats = counter_stats([10.0, 20.0, 40.0], [0, 1_000_000_000, 2_000_000_000])
    assert stats == {"total": 30.0, "rate": 15.0, "rate_avg": 15.0, "rate_min": 10.0, "rate_max": 20.0,
                     "rate_std": pytest.approx(math.sqrt(50))}
    assert counter_stats([5.0, 5.0], [0, 10]) == {"total": 0.0, "rate": 0.0}


def test_gauge_stats_are_exact_percentiles() -> None:
    stats = gauge_stats([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (stats["avg"], stats["min"], stats["max"], stats["p50"], stats["p25"]) == (3.0, 1.0, 5.0, 3.0, 2.0)
    assert stats["std"] == pytest.approx(math.sqrt(2.5))
    assert gauge_stats([7.0])["std"] == 0.0 and gauge_stats([7.0])["p99"] == 7.0


def test_bucket_quantile_interpolates_inside_the_bucket() -> None:
    buckets = ((0.02, 0.0), (0.04, 10.0), (0.06, 10.0), (math.inf, 10.0))
    assert bucket_quantile(buckets, 0.5) == pytest.approx(0.03)
    assert bucket_quantile(buckets, 0.9) == pytest.approx(0.038)
    assert bucket_quantile(((1.0, 0.0), (math.inf, 4.0)), 0.5) == 1.0  # in +Inf: the top finite bound
    assert bucket_quantile(((1.0, 0.0), (math.inf, 0.0)), 0.5) is None


def test_histogram_delta_and_stats() -> None:
    a = HistogramValue(((0.1, 1.0), (0.5, 3.0), (math.inf, 4.0)), 4.0, 2.0)
    b = HistogramValue(((0.1, 1.0), (0.5, 7.0), (math.inf, 8.0)), 8.0, 3.0)
    reset = HistogramValue(((0.1, 0.0), (0.5, 2.0), (math.inf, 2.0)), 2.0, 0.5)
    delta = histogram_increase([a, b, reset])
    assert delta == HistogramValue(((0.1, 0.0), (0.5, 6.0), (math.inf, 6.0)), 6.0, 1.5)
    stats, buckets = histogram_stats(delta, 3.0)
    assert buckets == {"0.1": 0.0, "0.5": 6.0, "+Inf": 6.0}
    assert stats["count"] == 6 and stats["avg"] == 0.25 and stats["count_rate"] == 2.0
    assert stats["p50_estimate"] == pytest.approx(0.3)
    assert histogram_stats(histogram_increase([a, a]), 1.0)[0] == {"count": 0}


def test_scrub_non_finite() -> None:
    assert scrub_non_finite({"a": [math.nan, 1.0, {"b": math.inf}], "c": "x"}) == {"a": [None, 1.0, {"b": None}],
                                                                                   "c": "x"}


increments = st.lists(st.integers(0, 1000), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(increments, st.sets(st.integers(1, 29), max_size=4), st.integers(0, 10_000))
def test_reset_aware_increase_equals_what_was_added(steps: list[int], resets: set[int], start: int) -> None:
    """A counter that grows by `steps`, restarted from zero before the steps in `resets` (when
    the restart shows: the new value is below the last one scraped, the only way Prometheus can
    tell too): the increase seen by scraping after every step is exactly the sum of the steps."""
    values, value = [float(start)], start
    for i, step in enumerate(steps):
        value = step if i in resets and step < value else value + step
        values.append(float(value))
    assert counter_increase(values) == sum(steps)


BOUNDS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=200), st.sampled_from([0.5, 0.9, 0.99]))
def test_bucket_quantile_lands_in_the_bucket_of_the_true_quantile(values: list[float], q: float) -> None:
    """The estimate lies in the same bucket as the exact quantile of the observations (a rank in
    +Inf: the highest finite bound)."""
    ordered = sorted(values)
    cumulative = tuple((le, float(sum(v <= le for v in ordered))) for le in (*BOUNDS, math.inf))
    estimate = bucket_quantile(cumulative, q)
    exact = ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    assert estimate is not None
    upper = next(le for le in (*BOUNDS, math.inf) if exact <= le)
    lower = max([0.0, *(le for le in BOUNDS if le < upper)])
    if math.isinf(upper):
        assert estimate == BOUNDS[-1]
    else:
        assert lower <= estimate <= upper


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(0.0, 10.0, allow_nan=False), max_size=20), min_size=1, max_size=6),
       st.sets(st.integers(1, 5), max_size=2))
def test_histogram_increase_counts_every_observation_through_resets(batches: list[list[float]],
                                                                    resets: set[int]) -> None:
    def snapshot(obs: list[float]) -> HistogramValue:
        return HistogramValue(tuple((le, float(sum(v <= le for v in obs))) for le in (*BOUNDS, math.inf)),
                              float(len(obs)), sum(obs))

    observed: list[float] = []
    snapshots = [snapshot([])]
    expected: list[float] = []
    for i, batch in enumerate(batches):
        if i in resets and len(batch) < len(observed):  # a restart that shows (count went down)
            observed = []
        observed = observed + batch
        expected += batch
        snapshots.append(snapshot(observed))
    delta = histogram_increase(snapshots)
    assert delta.count == len(expected)
    assert delta.sum == pytest.approx(sum(expected))
    assert dict(delta.buckets) == {le: float(sum(v <= le for v in expected)) for le in (*BOUNDS, math.inf)}
