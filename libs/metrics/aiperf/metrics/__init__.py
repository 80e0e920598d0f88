"""Per-request metrics, exact aggregation and AIPerf-shaped exports (pure: no sockets).

record-processor: `compute_metrics(record, parse_response(...), count_tokens=...)`.
records-manager: `Aggregator.add` each `MetricRecord`, `JsonlRecordWriter.write` it, then
`Aggregator.summary(...)` -> `write_summary_json`, `write_summary_csv`, `render_console_table`.
`--export-level raw`: record-processors `RawPartWriter.write` each `RequestRecord` and `commit`;
the controller `join_parts` into profile_export_raw.jsonl.

Importing the package is cheap: each name is imported from its submodule when first used
(PEP 562), so a process that needs only `write_atomic` or `join_parts` (the `aiperf` command)
never imports numpy (`aggregate`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiperf.metrics.aggregate import (
        PERCENTILES,
        STAT_KEYS,
        Aggregator,
        MetricStats,
        OslMismatchThresholds,
        Summary,
    )
    from aiperf.metrics.atomic import write_atomic
    from aiperf.metrics.catalog import (
        DERIVED_METRICS,
        RECORD_METRICS,
        SPECS,
        SWEEP_METRICS,
        MetricSpec,
        spec_of,
    )
    from aiperf.metrics.console import render_console_table, render_console_tables
    from aiperf.metrics.raw_jsonl import RAW_JSONL, RawPartMismatch, RawPartWriter, join_parts, raw_json
    from aiperf.metrics.record import compute_metrics
    from aiperf.metrics.record_jsonl import JsonlRecordWriter, record_json, record_lines
    from aiperf.metrics.saturation import client_saturation, saturation_line
    from aiperf.metrics.shards import ShardBuilder
    from aiperf.metrics.summary_csv import summary_csv, write_summary_csv
    from aiperf.metrics.summary_json import EXTENSIONS_KEY, summary_document, write_summary_json

_SUBMODULE = {
    "Aggregator": "aggregate", "DERIVED_METRICS": "catalog", "EXTENSIONS_KEY": "summary_json",
    "JsonlRecordWriter": "record_jsonl", "MetricSpec": "catalog", "MetricStats": "aggregate",
    "OslMismatchThresholds": "aggregate", "PERCENTILES": "aggregate", "RAW_JSONL": "raw_jsonl",
    "RECORD_METRICS": "catalog", "RawPartMismatch": "raw_jsonl", "RawPartWriter": "raw_jsonl",
    "SPECS": "catalog", "ShardBuilder": "shards", "STAT_KEYS": "aggregate", "SWEEP_METRICS": "catalog", "Summary": "aggregate",
    "client_saturation": "saturation", "compute_metrics": "record", "join_parts": "raw_jsonl",
    "raw_json": "raw_jsonl", "record_json": "record_jsonl", "record_lines": "record_jsonl", "render_console_table": "console",
    "render_console_tables": "console", "saturation_line": "saturation", "spec_of": "catalog",
    "summary_csv": "summary_csv", "summary_document": "summary_json", "write_atomic": "atomic",
    "write_summary_csv": "summary_csv", "write_summary_json": "summary_json",
}
"""Which submodule defines each public name."""


def __getattr__(name: str) -> Any:
    """The public `name`, imported from its submodule on first use. Every public name of that
    submodule is bound at once: importing `aiperf.metrics.summary_csv` sets this package's
    `summary_csv` to the submodule, and the function of that name must win (as it did when
    this package imported everything eagerly)."""
    module = _SUBMODULE.get(name)
    if module is None:
        raise AttributeError(f"module 'aiperf.metrics' has no attribute {name!r}")
    loaded = importlib.import_module(f"aiperf.metrics.{module}")
    for public, where in _SUBMODULE.items():
        if where == module:
            globals()[public] = getattr(loaded, public)
    return globals()[name]


__all__ = [
    "DERIVED_METRICS", "EXTENSIONS_KEY", "PERCENTILES", "RAW_JSONL", "RECORD_METRICS", "SPECS", "STAT_KEYS",
    "SWEEP_METRICS", "Aggregator", "JsonlRecordWriter", "MetricSpec", "MetricStats",
    "OslMismatchThresholds", "RawPartMismatch", "RawPartWriter", "ShardBuilder", "Summary", "compute_metrics",
    "join_parts", "raw_json", "record_json", "record_lines", "render_console_table",
    "render_console_tables", "spec_of", "summary_csv", "summary_document", "write_atomic",
    "write_summary_csv", "write_summary_json", "client_saturation", "saturation_line",
]
