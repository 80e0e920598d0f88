"""Per-request metrics, exact aggregation and AIPerf-shaped exports (pure: no sockets).

record-processor: `compute_metrics(record, parse_response(...), count_tokens=...)`.
records-manager: `Aggregator.add` each `MetricRecord`, `JsonlRecordWriter.write` it, then
`Aggregator.summary(...)` -> `write_summary_json`, `write_summary_csv`, `render_console_table`.
`--export-level raw`: record-processors `RawPartWriter.write` each `RequestRecord` and `commit`;
the controller `join_parts` into profile_export_raw.jsonl.
"""

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
from aiperf.metrics.record_jsonl import JsonlRecordWriter, record_json
from aiperf.metrics.saturation import client_saturation, saturation_line
from aiperf.metrics.summary_csv import summary_csv, write_summary_csv
from aiperf.metrics.summary_json import EXTENSIONS_KEY, summary_document, write_summary_json

__all__ = [
    "DERIVED_METRICS", "EXTENSIONS_KEY", "PERCENTILES", "RAW_JSONL", "RECORD_METRICS", "SPECS", "STAT_KEYS",
    "SWEEP_METRICS", "Aggregator", "JsonlRecordWriter", "MetricSpec", "MetricStats",
    "OslMismatchThresholds", "RawPartMismatch", "RawPartWriter", "Summary", "compute_metrics",
    "join_parts", "raw_json", "record_json", "render_console_table",
    "render_console_tables", "spec_of", "summary_csv", "summary_document", "write_atomic",
    "write_summary_csv", "write_summary_json", "client_saturation", "saturation_line",
]
