"""`server_metrics_export.json` and `.csv` in AIPerf 0.13's shape (schema "1.1").

JSON: `schema_version, aiperf_version, benchmark_id, summary, metrics` (the profiling phase),
`warmup_metrics` (the warmup phase, when the run has one) and `endpoint_errors`. `metrics` maps a
family name (a counter's without `_total`) to `{type, description, unit, series}`; one series per
endpoint and label set: `{endpoint_url, labels, stats}` plus `buckets` for histograms (the
bucket increases, cumulative, keyed by upper bound). `summary`: `endpoints_configured`,
`endpoints_successful`, `start_time`, `end_time` (ISO, UTC) and `endpoint_info` per endpoint.

CSV: one section per type (counter, gauge, histogram, unknown; blank line between), each with the
header `Endpoint,Type,Metric,Unit,<stats>,Description`; `Endpoint` is `host:port`, `Metric` the
family name with its labels (`name{k="v"}`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiperf.servermetrics.collector import Round, ServerMetricsCollector
from aiperf.servermetrics.parse import Family, HistogramValue, Labels
from aiperf.servermetrics.stats import (
    PERCENTILES,
    counter_stats,
    gauge_stats,
    histogram_increase,
    histogram_stats,
    scrub_non_finite,
)

SCHEMA_VERSION = "1.1"
JSON_NAME, CSV_NAME = "server_metrics_export.json", "server_metrics_export.csv"

_UNITS = (  # longest suffix first
    ("_seconds", "seconds"), ("_milliseconds", "milliseconds"), ("_ms", "milliseconds"),
    ("_nanoseconds", "nanoseconds"), ("_ns", "nanoseconds"), ("_bytes", "bytes"), ("_tokens", "tokens"),
    ("_requests", "requests"), ("request_success", "requests"), ("_errors", "errors"), ("_blocks", "blocks"),
    ("_ratio", "ratio"), ("_percent", "percent"), ("_perc", "percent"), ("_celsius", "celsius"),
    ("_joules", "joule"), ("_watts", "watt"), ("_total", "count"), ("_count", "count"),
)
_COLUMNS = {
    "counter": ["total", "rate", "rate_avg", "rate_min", "rate_max", "rate_std"],
    "gauge": ["avg", "min", "max", "std", *(f"p{p}" for p in PERCENTILES)],
    "histogram": ["count", "sum", "avg", "count_rate", "sum_rate", *(f"p{p}_estimate" for p in PERCENTILES)],
}
_COLUMNS["unknown"] = _COLUMNS["gauge"]


def unit_of(name: str) -> str | None:
    """The unit a family's name implies (its suffix), or None."""
    for suffix, unit in _UNITS:
        if name.endswith(suffix):
            return unit
    return None


def metrics_between(rounds: Sequence[Round], first: int, last: int, endpoints: Sequence[str]) -> dict[str, Any]:
    """The `metrics` object of the rounds `first..last` (inclusive). For each endpoint the window
    starts at the last round up to `first` that it answered (a baseline that failed, a scrape
    timed out on a loaded server, falls back to the answer before it rather than losing the
    phase's start: counters only grow), and ends at the first round from `last` on that it
    answered (an end round that failed falls forward to the next answer rather than losing the
    phase's end: for the run's last phase nothing comes after it; for an earlier one, what
    the next phase did until that answer counts too, as with a start that fell back). A series
    absent from the first round an endpoint answered in the window but present later started
    from zero (servers create labelled series lazily), so its whole value counts."""
    out: dict[str, Any] = {}
    for url in endpoints:
        start, end = first, last
        while start > 0 and not isinstance(rounds[start].results.get(url), dict):
            start -= 1
        while end < len(rounds) - 1 and not isinstance(rounds[end].results.get(url), dict):
            end += 1
        window = [(r.recv_ns, fams) for r in rounds[start:end + 1] if isinstance(fams := r.results.get(url), dict)]
        if not window:
            continue
        names: dict[str, Family] = {}
        for _, fams in window:
            names.update(fams)
        for name, latest in sorted(names.items()):
            entry = out.setdefault(name, {"type": latest.kind, "description": latest.description,
                                          "unit": unit_of(name) or (unit_of(name + "_total") if latest.kind == "counter" else None),
                                          "series": []})
            keys: dict[Labels, None] = {}
            for _, fams in window:
                keys.update(dict.fromkeys(fams[name].series if name in fams else ()))
            for labels in keys:
                entry["series"].append(_series(url, name, latest.kind, labels, window))
    return out


def _series(url: str, name: str, kind: str, labels: Labels,
            window: list[tuple[int, dict[str, Family]]]) -> dict[str, Any]:
    points = [(t, fams[name].series[labels]) for t, fams in window
              if name in fams and labels in fams[name].series]
    times = [t for t, _ in points]
    values = [v for _, v in points]
    fresh = name not in window[0][1] or labels not in window[0][1][name].series
    series: dict[str, Any] = {"endpoint_url": url}
    if labels:
        series["labels"] = dict(labels)
    if kind == "histogram":
        hists = [v for v in values if isinstance(v, HistogramValue)]
        if fresh:
            hists.insert(0, HistogramValue(tuple((le, 0.0) for le, _ in hists[0].buckets), 0.0, 0.0))
            times.insert(0, window[0][0])
        seconds = (times[-1] - times[0]) / 1e9 if len(times) > 1 else 0.0
        series["stats"], series["buckets"] = histogram_stats(histogram_increase(hists), seconds)
    elif kind == "counter":
        floats = [float(v) for v in values if not isinstance(v, HistogramValue)]
        if fresh:
            floats.insert(0, 0.0)
            times.insert(0, window[0][0])
        series["stats"] = counter_stats(floats, times)
    else:
        series["stats"] = gauge_stats([float(v) for v in values if not isinstance(v, HistogramValue)])
    return series


def _iso(ns: int | None) -> str | None:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat() if ns else None


def build_export(collector: ServerMetricsCollector, *, profiling: str, warmup: str | None = None,
                 aiperf_version: str = "dev", benchmark_id: str = "") -> dict[str, Any]:
    """The JSON document (see the module doc) of `collector`'s rounds for phases `profiling`
    and `warmup` (by name in `collector.phases`); a phase it never saw has no metrics."""
    rounds, endpoints = collector.rounds, collector.endpoints

    def of(name: str | None) -> dict[str, Any]:
        phase = collector.phases.get(name) if name else None
        if phase is None or phase.end_round is None:
            return {}
        return metrics_between(rounds, phase.start_round, phase.end_round, endpoints)

    successful = [u for u in endpoints if any(isinstance(r.results.get(u), dict) for r in rounds)]
    info = {url: {"total_fetches": i.fetches, "failed_fetches": i.failures, "first_fetch_ns": i.first_ns,
                  "last_fetch_ns": i.last_ns,
                  "avg_fetch_latency_ms": i.latency_ns / i.fetches / 1e6 if i.fetches else 0.0}
            for url, i in collector.info.items()}
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "aiperf_version": aiperf_version, "benchmark_id": benchmark_id,
        "summary": {"endpoints_configured": list(endpoints), "endpoints_successful": successful,
                    "start_time": _iso(rounds[0].sent_ns if rounds else None),
                    "end_time": _iso(rounds[-1].recv_ns if rounds else None), "endpoint_info": info},
        "metrics": of(profiling)}
    if warmup is not None:
        doc["warmup_metrics"] = of(warmup)
    doc["endpoint_errors"] = {url: i.last_error for url, i in collector.info.items() if i.failures}
    return scrub_non_finite(doc)


def export_csv(doc: dict[str, Any]) -> str:
    """The CSV form (see the module doc) of a document from `build_export`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    first = True
    for kind, columns in _COLUMNS.items():
        rows = [(name, metric, series) for name, metric in doc.get("metrics", {}).items()
                if metric["type"] == kind for series in metric["series"]]
        if not rows:
            continue
        if not first:
            writer.writerow([])
        first = False
        writer.writerow(["Endpoint", "Type", "Metric", "Unit", *columns, "Description"])
        for name, metric, series in rows:
            labels = series.get("labels") or {}
            shown = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
            stats = series["stats"]
            writer.writerow([urlsplit(series["endpoint_url"]).netloc, kind, shown, metric["unit"] or "",
                             *(_cell(stats.get(c)) for c in columns), metric["description"]])
    return buf.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(value)


def write_exports(doc: dict[str, Any], directory: Path,
                  formats: Sequence[str] = ("json", "csv")) -> list[str]:
    """Write the files of `formats` (`json`, `csv`; `server_metrics.formats`) into `directory`
    atomically; returns their names."""
    from aiperf.metrics.atomic import write_atomic

    written = []
    if "json" in formats:
        write_atomic(directory / JSON_NAME, (json.dumps(doc, indent=2) + "\n").encode())
        written.append(JSON_NAME)
    if "csv" in formats:
        write_atomic(directory / CSV_NAME, export_csv(doc).encode())
        written.append(CSV_NAME)
    return written
