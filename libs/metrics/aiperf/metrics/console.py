"""The console table, laid out like AIPerf's "LLM Metrics" table under our name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiperf.metrics.aggregate import MetricStats, Summary

if TYPE_CHECKING:  # rich is imported when a table is rendered, not by every metrics user
    from rich.table import Table

TITLE = "aiperf | LLM Metrics"
COLUMNS = ("avg", "min", "max", "p99", "p90", "p50", "std")
_HIDDEN = frozenset({"inter_chunk_latency", "usage_prompt_tokens", "usage_completion_tokens",
                     "usage_total_tokens", "usage_reasoning_tokens", "error_isl", "total_error_isl",
                     "completed_request_count", "benchmark_duration"})


def _cell(value: float | int | None) -> str:
    if value is None:
        return "N/A"
    return f"{value:,.2f}"


def _label(stats: MetricStats) -> str:
    if stats.unit and stats.unit not in {"requests", "count"}:
        return f"{stats.header} ({stats.unit})"
    return stats.header


def render_console_table(summary: Summary) -> Table:
    """A rich Table: distribution metrics first (all columns), then scalars (avg only).

    Per-chunk, usage and bookkeeping metrics are left out, as in AIPerf's table.
    """
    from rich.table import Table

    table = Table(title=TITLE)
    table.add_column("Metric", justify="right", style="cyan")
    for col in COLUMNS:
        table.add_column(col, justify="right", style="green")
    shown = [s for t, s in summary.metrics.items() if t not in _HIDDEN]
    for stats in [s for s in shown if s.is_distribution] + [s for s in shown if not s.is_distribution]:
        table.add_row(_label(stats), *(_cell(stats.stat(c)) for c in COLUMNS))
    return table
