"""profile_export_aiperf.csv: AIPerf 0.13's two-section layout.

Section 1 ``Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std`` (metrics with
percentiles: record metrics, and time-weighted ones with the stats they lack left empty), a
blank line, section 2 ``Metric,Value`` (derived scalars). Rows are sorted by tag; a row's name
is ``Header (unit)`` (no unit for ``requests``/``count``); numbers have two decimals, integers
none. Our extra record metrics are extra rows of section 1.
"""

from __future__ import annotations

import csv
import io
import os

from aiperf.metrics.aggregate import STAT_KEYS, MetricStats, Summary
from aiperf.metrics.atomic import write_atomic


def _name(stats: MetricStats) -> str:
    if stats.unit and stats.unit.lower() not in {"count", "requests"}:
        return f"{stats.header} ({stats.unit})"
    return stats.header


def _number(value: float | int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{value:.2f}"


def summary_csv(summary: Summary) -> str:
    """The CSV text (``\\r\\n`` line ends, as Python's csv writer emits)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    every = {**summary.metrics, **summary.extras}
    records = sorted((t, s) for t, s in every.items() if s.has_percentiles)
    scalars = sorted((t, s) for t, s in every.items() if not s.has_percentiles)
    if records:
        writer.writerow(["Metric", *STAT_KEYS])
        for _, s in records:
            writer.writerow([_name(s), *(_number(s.stat(k)) for k in STAT_KEYS)])
        if scalars:
            writer.writerow([])
    if scalars:
        writer.writerow(["Metric", "Value"])
        for tag, s in scalars:
            value: float | int = int(s.avg) if tag.endswith("_count") else s.avg
            writer.writerow([_name(s), _number(value)])
    return buf.getvalue()


def write_summary_csv(path: str | os.PathLike[str], summary: Summary) -> None:
    """Write profile_export_aiperf.csv. Blocks on file I/O; atomic (`write_atomic`); raises
    `OSError` on failure."""
    write_atomic(path, summary_csv(summary).encode())
