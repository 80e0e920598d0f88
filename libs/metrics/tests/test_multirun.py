"""Aggregates over trials and over a sweep's variations: key sets, intervals, Pareto set."""

from __future__ import annotations

import csv
import io
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.metrics.multirun import (
    AGGREGATE_KEYS,
    aggregate_csv,
    aggregate_runs,
    aggregate_table,
    pareto_optimal,
    sweep_csv,
    sweep_document,
)


def summary(ttft: float, throughput: float, p99: float) -> dict[str, Any]:
    return {"schema_version": "1.4", "benchmark_id": "x",
            "time_to_first_token": {"unit": "ms", "avg": ttft, "p99": ttft + 1, "count": 10, "sum": ttft * 10},
            "request_throughput": {"unit": "requests/sec", "avg": throughput},
            "request_latency": {"unit": "ms", "avg": p99 - 5, "p99": p99},
            "input_config": {"unit": "not a metric", "models": ["m"]}, "was_cancelled": False}


def test_aggregate_of_three_trials() -> None:
    doc = aggregate_runs([summary(10, 5, 100), summary(12, 5, 100), summary(14, 5, 100)], confidence=0.95)
    assert (doc["num_profile_runs"], doc["num_successful_runs"], doc["failed_runs"]) == (3, 3, [])
    ttft = doc["metrics"]["time_to_first_token"]
    assert set(ttft) == {"avg", "p99"}  # count and sum are not compared across runs
    assert tuple(ttft["avg"]) == AGGREGATE_KEYS
    assert ttft["avg"]["mean"] == 12.0 and ttft["avg"]["unit"] == "ms"
    assert ttft["avg"]["ci_low"] == pytest.approx(7.0317, abs=1e-4)
    assert ttft["avg"]["t_critical"] == pytest.approx(4.302653, abs=1e-6)
    assert "input_config" not in doc["metrics"]
    rows = list(csv.reader(io.StringIO(aggregate_csv(doc))))
    assert rows[0] == ["Metric", "Stat", *AGGREGATE_KEYS]
    assert ["time_to_first_token", "avg"] in [r[:2] for r in rows]
    table = aggregate_table(doc, title="t")
    assert "95% CI" in table and "[7.032, 16.968]" in table


def test_failed_trials_are_listed_and_left_out() -> None:
    doc = aggregate_runs([summary(10, 5, 100), None, summary(14, 5, 100)], confidence=0.9)
    assert (doc["num_successful_runs"], doc["failed_runs"]) == (2, [2])
    assert doc["metrics"]["time_to_first_token"]["avg"]["mean"] == 12.0
    assert aggregate_runs([None], confidence=0.9)["metrics"] == {}


def dominated(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """b dominates a."""
    return b[0] >= a[0] and b[1] <= a[1] and b != a


points = st.dictionaries(st.text("abcdef", min_size=1, max_size=3),
                         st.tuples(st.integers(0, 20).map(float), st.integers(0, 20).map(float)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(points)
def test_pareto_matches_brute_force(pts: dict[str, tuple[float, float]]) -> None:
    front = pareto_optimal(pts)
    expected = [k for k, p in pts.items() if not any(dominated(p, q) for q in pts.values())]
    assert front == expected
    for a, b in itertools.combinations(front, 2):
        assert not dominated(pts[a], pts[b]) and not dominated(pts[b], pts[a])


def test_sweep_document_best_and_pareto() -> None:
    combos = []
    for label, (thr, p99) in {"concurrency_1": (5.0, 100.0), "concurrency_2": (9.0, 110.0),
                              "concurrency_4": (8.0, 150.0)}.items():
        agg = aggregate_runs([summary(10, thr, p99)] * 2, confidence=0.95)
        combos.append((label, {"concurrency": int(label[-1])}, agg))
    doc = sweep_document(combos, sweep_type="grid")
    assert set(doc) >= {"per_combination_metrics", "best_configurations", "pareto_optimal"}
    assert doc["best_configurations"]["best_throughput"]["label"] == "concurrency_2"
    assert doc["best_configurations"]["best_latency_p99"]["label"] == "concurrency_1"
    assert [p["label"] for p in doc["pareto_optimal"]] == ["concurrency_1", "concurrency_2"]
    rows = list(csv.DictReader(io.StringIO(sweep_csv(doc))))
    assert [r["pareto_optimal"] for r in rows] == ["true", "true", "false"]
    assert rows[1]["concurrency"] == "2" and float(rows[1]["request_throughput_avg_mean"]) == 9.0
