"""The console tables, laid out like AIPerf's under our name.

AIPerf 0.13 prints one table per console group that has metrics, in this order:
"LLM Metrics: Effective" (time-weighted sweep metrics), "LLM Metrics: Active", "LLM Metrics:
Usage" (server-reported usage), then "LLM Metrics" (everything else it shows). HTTP trace
metrics get their own table when asked for (`--show-trace-timing`); OSL-mismatch and
bookkeeping metrics are exported but not shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiperf.metrics.aggregate import MetricStats, Summary
from aiperf.metrics.catalog import spec_of

if TYPE_CHECKING:  # rich is imported when a table is rendered, not by every metrics user
    from rich.table import Table

TITLE = "aiperf | LLM Metrics"
GROUP_TITLES = {"effective": f"{TITLE}: Effective", "active": f"{TITLE}: Active", "usage": f"{TITLE}: Usage",
                "main": TITLE}
"""Console group -> table title, in print order."""
COLUMNS = ("avg", "min", "max", "p99", "p90", "p50", "std")
_HIDDEN = frozenset({"inter_chunk_latency", "total_error_isl", "completed_request_count", "benchmark_duration"})


def _cell(value: float | int | None) -> str:
    if value is None:
        return "N/A"
    return f"{value:,.2f}"


def _label(stats: MetricStats) -> str:
    if stats.unit and stats.unit not in {"requests", "count"}:
        return f"{stats.header} ({stats.unit})"
    return stats.header


def _table(title: str, rows: list[MetricStats]) -> Table:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("Metric", justify="right", style="cyan")
    for col in COLUMNS:
        table.add_column(col, justify="right", style="green")
    for stats in [s for s in rows if s.has_percentiles] + [s for s in rows if not s.has_percentiles]:
        table.add_row(_label(stats), *(_cell(stats.stat(c)) for c in COLUMNS))
    return table


TRACE_TITLE = "aiperf | HTTP Trace Timing"
"""The table `--show-trace-timing` adds (AIPerf's "HTTP Trace Timing": the `http_req_*` metrics)."""


def render_console_tables(summary: Summary, *, trace_timing: bool = False) -> list[Table]:
    """One rich Table per console group with metrics, in AIPerf's order; within a table
    metrics with percentiles first (all columns), then scalars (avg only). With `trace_timing`
    (`artifacts.show_trace_timing`) a last table holds the HTTP trace metrics (`http_req_*`),
    as AIPerf's HTTP trace console exporter prints them."""
    groups: dict[str, list[MetricStats]] = {group: [] for group in GROUP_TITLES}
    for tag, stats in summary.metrics.items():
        group = spec_of(tag).console
        if group in groups and tag not in _HIDDEN:
            groups[group].append(stats)
    tables = [_table(GROUP_TITLES[g], rows) for g, rows in groups.items() if rows or g == "main"]
    trace = [stats for tag, stats in summary.metrics.items() if tag.startswith("http_req_")]
    if trace_timing and trace:
        tables.append(_table(TRACE_TITLE, trace))
    return tables


def render_console_table(summary: Summary) -> Table:
    """The main "LLM Metrics" table alone (see `render_console_tables`)."""
    return render_console_tables(summary)[-1]
