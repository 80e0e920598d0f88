"""profile_export_aiperf.json: AIPerf 0.13's summary shape (schema 1.4) plus one key of ours."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from aiperf.messages import ErrorDetails
from aiperf.metrics.aggregate import MetricStats, Summary
from aiperf.metrics.atomic import write_atomic

SCHEMA_VERSION = "1.4"
EXTENSIONS_KEY = "aiperf_extensions"
"""Our additions live under this single key; every AIPerf key keeps its meaning and shape."""

_JSON_STAT_ORDER = ("avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max", "std",
                    "count", "sum")


def metric_json(stats: MetricStats) -> dict[str, Any]:
    """One metric object as AIPerf writes it: ``unit`` then the stats that are set."""
    out: dict[str, Any] = {"unit": stats.unit}
    for key in _JSON_STAT_ORDER:
        value = stats.stat(key)
        if value is not None:
            out[key] = value
    if stats.count is None and stats.tag.endswith("_count") and float(stats.avg).is_integer():
        out["avg"] = int(stats.avg)  # counters are integers in AIPerf's file
    return out


def error_summary_json(errors: Sequence[tuple[ErrorDetails, int]]) -> list[dict[str, Any]]:
    """AIPerf's ``error_summary``: ``[{"error_details": {code, type, message}, "count": n}]``."""
    return [{"error_details": {"code": e.code, "type": e.type, "message": e.message}, "count": n}
            for e, n in errors]


def _time(value: dt.datetime | str) -> str:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def summary_document(
    summary: Summary,
    *,
    input_config: Mapping[str, Any],
    error_summary: Sequence[tuple[ErrorDetails, int]] | None,
    start_time: dt.datetime | str,
    end_time: dt.datetime | str,
    was_cancelled: bool,
    extras: Mapping[str, Any] | None = None,
    aiperf_version: str = "dev",
    benchmark_id: str = "",
) -> dict[str, Any]:
    """The summary as a JSON-ready dict, keys in AIPerf's order.

    `error_summary` None means `summary.errors`. Our extra metrics and `extras` (e.g. credit
    accounting) go under ``aiperf_extensions``: ``{"metrics": {tag: stats}, **extras}``.
    """
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "aiperf_version": aiperf_version,
                           "benchmark_id": benchmark_id}
    for tag, stats in summary.metrics.items():
        doc[tag] = metric_json(stats)
    doc["input_config"] = dict(input_config)
    doc["was_cancelled"] = was_cancelled
    doc["is_complete"] = not was_cancelled
    doc["error_summary"] = error_summary_json(summary.errors if error_summary is None else error_summary)
    doc["start_time"] = _time(start_time)
    doc["end_time"] = _time(end_time)
    doc[EXTENSIONS_KEY] = {"metrics": {t: metric_json(s) for t, s in summary.extras.items()},
                           **dict(extras or {})}
    return doc


def write_summary_json(
    path: str | os.PathLike[str],
    summary: Summary,
    input_config: Mapping[str, Any],
    error_summary: Sequence[tuple[ErrorDetails, int]] | None,
    start_time: dt.datetime | str,
    end_time: dt.datetime | str,
    was_cancelled: bool,
    extras: Mapping[str, Any] | None = None,
    *,
    aiperf_version: str = "dev",
    benchmark_id: str = "",
) -> None:
    """Write profile_export_aiperf.json (2-space indented; NaN/inf become null).

    Values JSON cannot hold in `input_config`/`extras` are written as their `str`. Blocks on
    file I/O; atomic (`write_atomic`); raises `OSError` when the file cannot be written.
    """
    doc = summary_document(summary, input_config=input_config, error_summary=error_summary,
                           start_time=start_time, end_time=end_time, was_cancelled=was_cancelled,
                           extras=extras, aiperf_version=aiperf_version, benchmark_id=benchmark_id)
    data = orjson.dumps(doc, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    write_atomic(path, data + b"\n")
