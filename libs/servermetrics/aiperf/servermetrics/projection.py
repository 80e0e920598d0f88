"""The curated projection of a server-metrics export that rides on the AIPerfJob status.

The status subresource has an object-size ceiling, and one patch too large is rejected whole
(with every other status key in it), so the CR carries a bounded subset, never the export:

- an allow-list (`CURATED_METRIC_NAMES`), not a copy minus exclusions, so new server metrics never
  grow it silently;
- per series only `endpoint_url`, `labels` and the stats `avg, max, rate, p99_estimate, count`;
- a metric with more than `max_series` series (over all endpoints) or a series with more than
  `max_labels` labels is dropped whole (a trimmed series list would read as a wrong aggregate);
- when the whole projection still serializes to more than `max_bytes`, it carries no metrics:
  `{summary, metrics: {}, projection_dropped: true, projection_message}` (`summary` kept only if
  that marker fits), which replaces a stale snapshot instead of leaving it in place;
- NaN and infinities become null (they are not valid JSON numbers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from aiperf.servermetrics.stats import scrub_non_finite

log = structlog.get_logger("aiperf.servermetrics.projection")

CURATED_METRIC_NAMES: frozenset[str] = frozenset({
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
    "vllm:kv_cache_usage_perc", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success",
    "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:prefix_cache_hits", "vllm:prefix_cache_queries",
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:prompt_tokens",
    "sglang:generation_tokens", "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
    "dynamo_component_inflight_requests", "dynamo_component_kvstats_gpu_cache_usage_percent",
    "dynamo_frontend_time_to_first_token_seconds",
})
"""The metrics the dashboard renders; a metric shown there must be added here too."""

PROJECTED_STATS = ("avg", "max", "rate", "p99_estimate", "count")
MAX_SERIES_ENV = "AIPERF_SERVER_METRICS_CR_PROJECTION_MAX_SERIES"
MAX_LABELS_ENV = "AIPERF_SERVER_METRICS_CR_PROJECTION_MAX_LABELS"
MAX_BYTES_ENV = "AIPERF_SERVER_METRICS_CR_PROJECTION_MAX_BYTES"


@dataclass(frozen=True, kw_only=True)
class ProjectionLimits:
    """Caps of the projection (see the module doc); defaults keep it far below the ceiling."""

    max_series: int = 256
    max_labels: int = 16
    max_bytes: int = 256 * 1024

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ProjectionLimits:
        """The limits, each overridable by its `AIPERF_SERVER_METRICS_CR_PROJECTION_*` variable;
        a value that is not a positive integer keeps the default (and is logged)."""
        values: dict[str, int] = {}
        for field, var in (("max_series", MAX_SERIES_ENV), ("max_labels", MAX_LABELS_ENV),
                           ("max_bytes", MAX_BYTES_ENV)):
            raw = env.get(var)
            if raw is None:
                continue
            if raw.isdigit() and int(raw) > 0:
                values[field] = int(raw)
            else:
                log.warning("server_metrics.bad_limit", variable=var, value=raw)
        return cls(**values)


def project_for_cr(export: Mapping[str, Any], limits: ProjectionLimits | None = None) -> dict[str, Any]:
    """The projection of `export` (a `build_export` document) within `limits` (default:
    `ProjectionLimits()`); never raises."""
    limits = limits or ProjectionLimits()
    summary = {k: export.get("summary", {}).get(k)
               for k in ("endpoints_configured", "endpoints_successful", "start_time", "end_time")}
    metrics: dict[str, Any] = {}
    for name, metric in sorted(export.get("metrics", {}).items()):
        if name not in CURATED_METRIC_NAMES:
            continue
        series = metric.get("series", [])
        if len(series) > limits.max_series or any(len(s.get("labels") or {}) > limits.max_labels for s in series):
            log.debug("server_metrics.projection_metric_dropped", metric=name, series=len(series))
            continue
        metrics[name] = {"type": metric.get("type"), "unit": metric.get("unit"), "series": [
            {"endpoint_url": s.get("endpoint_url"), "labels": s.get("labels") or {},
             "stats": {k: s["stats"][k] for k in PROJECTED_STATS if k in s.get("stats", {})}} for s in series]}
    projection = scrub_non_finite({"summary": summary, "metrics": metrics})
    size = len(json.dumps(projection, separators=(",", ":")))
    if size <= limits.max_bytes:
        return projection
    message = (f"server metrics collected but too large to carry on the status ({size} bytes > "
               f"{limits.max_bytes}); see server_metrics_export.json")
    log.warning("server_metrics.projection_dropped", size=size, max_bytes=limits.max_bytes)
    marker: dict[str, Any] = {"summary": projection["summary"], "metrics": {}, "projection_dropped": True,
                              "projection_message": message}
    if len(json.dumps(marker, separators=(",", ":"))) > limits.max_bytes:
        del marker["summary"]
    return marker
