"""Server metrics: scrape an inference server's Prometheus `/metrics` around each phase, compute
per-phase statistics, export them in AIPerf 0.13's shape, and project a bounded subset for the
AIPerfJob status."""

from aiperf.servermetrics.collector import (
    Fetch,
    FetchError,
    HttpFetch,
    PhaseWindow,
    Round,
    ServerMetricsCollector,
)
from aiperf.servermetrics.export import CSV_NAME, JSON_NAME, build_export, export_csv, write_exports
from aiperf.servermetrics.parse import ExpositionError, Family, HistogramValue, parse_metrics
from aiperf.servermetrics.projection import CURATED_METRIC_NAMES, ProjectionLimits, project_for_cr

__all__ = ["CSV_NAME", "CURATED_METRIC_NAMES", "JSON_NAME", "ExpositionError", "Family", "Fetch", "FetchError",
           "HistogramValue", "HttpFetch", "PhaseWindow", "ProjectionLimits", "Round", "ServerMetricsCollector",
           "build_export", "export_csv", "parse_metrics", "project_for_cr", "write_exports"]
