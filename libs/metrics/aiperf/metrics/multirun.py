"""Aggregates over repeated runs and over the variations of a sweep (AIPerf 0.13's layout).

`aggregate_runs` folds the `profile_export_aiperf.json` documents of the trials of one variation
into `profile_export_aiperf_aggregate.json/.csv`: for every metric and stat present in every
successful run, the Student-t interval of its mean (`AGGREGATE_KEYS`). `sweep_document` folds
the per-variation aggregates into `profile_export_aiperf_sweep.json/.csv`: the metrics of each
combination, the best configurations and the Pareto set of throughput (`request_throughput`
avg, larger is better) against latency (`request_latency` p99, smaller is better).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from aiperf.metrics.atomic import write_atomic
from aiperf.metrics.confidence import interval

__all__ = [
    "AGGREGATE_KEYS", "LATENCY", "THROUGHPUT", "aggregate_csv", "aggregate_runs", "aggregate_table",
    "pareto_optimal", "sweep_csv", "sweep_document", "write_json",
]

AGGREGATE_KEYS = ("mean", "std", "min", "max", "cv", "se", "ci_low", "ci_high", "t_critical", "unit")
"""The keys of one metric-stat of an aggregate, in file order."""

THROUGHPUT = ("request_throughput", "avg")
LATENCY = ("request_latency", "p99")
"""The (metric, stat) pairs the sweep ranks by: throughput up, latency down."""

_SKIPPED_STATS = frozenset({"unit", "count", "sum"})


def _metrics_of(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The metric objects of a summary document (top-level mappings with a `unit`)."""
    return {tag: value for tag, value in doc.items() if isinstance(value, Mapping) and "unit" in value}


def aggregate_runs(runs: Sequence[Mapping[str, Any] | None], *, confidence: float) -> dict[str, Any]:
    """The aggregate document of the trials `runs` (a summary document per trial, None for a
    trial without results, in trial order). A metric-stat is aggregated when every successful
    trial has it as a number."""
    done = [doc for doc in runs if doc is not None]
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    per_run = [_metrics_of(doc) for doc in done]
    if per_run:
        for tag, first in per_run[0].items():
            stats: dict[str, dict[str, Any]] = {}
            for stat in first:
                if stat in _SKIPPED_STATS:
                    continue
                values = [m.get(tag, {}).get(stat) for m in per_run]
                numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
                if len(numbers) != len(values):
                    continue
                got = interval(numbers, confidence)
                stats[stat] = {"mean": got.mean, "std": got.std, "min": got.min, "max": got.max, "cv": got.cv,
                               "se": got.se, "ci_low": got.ci_low, "ci_high": got.ci_high,
                               "t_critical": got.t_critical, "unit": first.get("unit", "")}
            if stats:
                metrics[tag] = stats
    return {
        "schema_version": "1.0",
        "aggregation_type": "confidence",
        "confidence_level": confidence,
        "num_profile_runs": len(runs),
        "num_successful_runs": len(done),
        "failed_runs": [i + 1 for i, doc in enumerate(runs) if doc is None],
        "metrics": metrics,
    }


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def aggregate_csv(doc: Mapping[str, Any]) -> str:
    """`Metric,Stat,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit`, one row per
    metric-stat, metrics sorted by tag."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["Metric", "Stat", *AGGREGATE_KEYS])
    for tag in sorted(doc["metrics"]):
        for stat, values in doc["metrics"][tag].items():
            writer.writerow([tag, stat, *(_cell(values[k]) for k in AGGREGATE_KEYS)])
    return buf.getvalue()


_TABLE_METRICS = ("time_to_first_token", "inter_token_latency", "request_latency", "output_token_throughput",
                  "request_throughput")


def aggregate_table(doc: Mapping[str, Any], *, title: str) -> str:
    """The console table: each headline metric's average over the trials with its interval."""
    level = f"{doc['confidence_level'] * 100:g}% CI"
    rows = [("Metric (avg over runs)", "mean", "std", "cv", level)]
    for tag in _TABLE_METRICS:
        got = doc["metrics"].get(tag, {}).get("avg")
        if got is None:
            continue
        name = f"{tag} ({got['unit']})" if got["unit"] else tag
        rows.append((name, f"{got['mean']:.3f}", f"{got['std']:.3f}", f"{got['cv'] * 100:.1f}%",
                     f"[{got['ci_low']:.3f}, {got['ci_high']:.3f}]"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{title}: {doc['num_successful_runs']} of {doc['num_profile_runs']} runs"]
    for i, row in enumerate(rows):
        cells = zip(row, widths, strict=True)
        lines.append("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(cells)))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _mean(aggregate: Mapping[str, Any], key: tuple[str, str]) -> float | None:
    got = aggregate["metrics"].get(key[0], {}).get(key[1])
    return None if got is None else float(got["mean"])


def pareto_optimal(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The labels of `points` (label -> (throughput, latency)) that no other point dominates
    (at least as much throughput and at most as much latency, one of them strictly), in the
    order given."""
    front = []
    for label, (thr, lat) in points.items():
        dominated = any(t >= thr and la <= lat and (t > thr or la < lat)
                        for other, (t, la) in points.items() if other != label)
        if not dominated:
            front.append(label)
    return front


def sweep_document(combinations: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]], *,
                   sweep_type: str) -> dict[str, Any]:
    """The sweep aggregate of `combinations` ((label, parameter values, aggregate document) per
    variation, in plan order). Variations without the ranking metrics take no part in the best
    configurations and the Pareto set."""
    per_combination = [{"label": label, "parameters": dict(params),
                        "num_successful_runs": agg["num_successful_runs"], "metrics": agg["metrics"]}
                       for label, params, agg in combinations]
    ranked = {label: (thr, lat) for label, _, agg in combinations
              if (thr := _mean(agg, THROUGHPUT)) is not None and (lat := _mean(agg, LATENCY)) is not None}
    params = {label: dict(p) for label, p, _ in combinations}
    best: dict[str, Any] = {}
    if ranked:
        top = max(ranked, key=lambda k: ranked[k][0])
        fast = min(ranked, key=lambda k: ranked[k][1])
        best["best_throughput"] = {"label": top, "parameters": params[top], "metric": ".".join(THROUGHPUT),
                                   "value": ranked[top][0]}
        best["best_latency_p99"] = {"label": fast, "parameters": params[fast], "metric": ".".join(LATENCY),
                                    "value": ranked[fast][1]}
    front = pareto_optimal(ranked)
    return {
        "schema_version": "1.0",
        "sweep_type": sweep_type,
        "parameters": sorted({k for _, p, _ in combinations for k in p}),
        "num_combinations": len(combinations),
        "per_combination_metrics": per_combination,
        "best_configurations": best,
        "pareto_optimal": [{"label": label, "parameters": params[label], "throughput": ranked[label][0],
                            "latency_p99": ranked[label][1]} for label in front],
    }


_SWEEP_COLUMNS = (("request_throughput", "avg"), ("request_latency", "p99"), ("request_latency", "avg"),
                  ("time_to_first_token", "avg"), ("inter_token_latency", "avg"),
                  ("output_token_throughput", "avg"))


def sweep_csv(doc: Mapping[str, Any]) -> str:
    """One row per combination: its label and parameter values, then mean and interval of the
    headline metrics, then whether it is Pareto-optimal."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    names = doc["parameters"]
    head = [f"{tag}_{stat}_{part}" for tag, stat in _SWEEP_COLUMNS for part in ("mean", "ci_low", "ci_high")]
    writer.writerow(["label", *names, *head, "pareto_optimal"])
    front = {p["label"] for p in doc["pareto_optimal"]}
    for combo in doc["per_combination_metrics"]:
        cells = []
        for tag, stat in _SWEEP_COLUMNS:
            got = combo["metrics"].get(tag, {}).get(stat, {})
            cells += [_cell(got.get(part)) for part in ("mean", "ci_low", "ci_high")]
        writer.writerow([combo["label"], *(_cell(combo["parameters"].get(n)) for n in names), *cells,
                         str(combo["label"] in front).lower()])
    return buf.getvalue()


def write_json(path: str | os.PathLike[str], doc: Mapping[str, Any]) -> None:
    """Write an aggregate document (2-space indented), atomically; raises `OSError`."""
    write_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
