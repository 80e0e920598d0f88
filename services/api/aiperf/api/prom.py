"""Prometheus `/metrics` of the api service: the run's live progress and its per-request
counters and latency histograms, in a registry of its own (never the process-global one).

Progress comes from the `RunView` at scrape time. Per-request numbers come from the records
the records-manager streams to ``profile_export.jsonl`` in the artifact directory: each scrape
reads the lines appended since the previous one (complete lines only), so counters only grow
and nothing runs between scrapes. Without that file (``--export-level summary``) the request
counters stay at zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import structlog
from litestar import Response, get
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from aiperf.api.view import RunView

log = structlog.get_logger("aiperf.api")

RECORDS_JSONL = "profile_export.jsonl"
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TO_SECONDS = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "ns": 1e-9, "us": 1e-6}
_UNKNOWN = "unknown"


class _ProgressCollector(Collector):
    """Gauges read from the view when scraped: state, and per benchmark phase the requests
    expected, completed, failed, and the credits sent once the phase stopped sending."""

    def __init__(self, view: RunView) -> None:
        self._view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._view.snapshot()
        state = GaugeMetricFamily("aiperf_run_state", "1 for the run's current state", labels=["state"])
        state.add_metric([snap["state"]], 1.0)
        yield state
        families = {
            "completed": GaugeMetricFamily("aiperf_phase_requests_completed",
                                           "Requests completed so far (errors included)", labels=["phase"]),
            "errors": GaugeMetricFamily("aiperf_phase_requests_failed", "Requests failed so far",
                                        labels=["phase"]),
            "expected": GaugeMetricFamily("aiperf_phase_requests_expected",
                                          "Requests the phase will send, when known (progress, else the phase's start)", labels=["phase"]),
            "elapsed_s": GaugeMetricFamily("aiperf_phase_elapsed_seconds", "Time since the phase started",
                                           labels=["phase"]),
        }
        for phase, p in snap["progress"].items():
            started = snap["phases"].get(phase, {}).get("started") or {}
            values = {**p, "expected": p.get("expected") or started.get("expected_credits")}
            for key, family in families.items():
                if values.get(key) is not None:
                    family.add_metric([phase], float(values[key]))
        sent = GaugeMetricFamily("aiperf_phase_requests_sent",
                                 "Credits (requests) issued by the phase, once it stopped sending",
                                 labels=["phase"])
        for phase, events in snap["phases"].items():
            final = events.get("complete") or events.get("sending_complete")
            if final is not None:
                sent.add_metric([phase], float(final["issued"]))
        yield from families.values()
        yield sent


class RecordTail:
    """Reads the complete lines appended to a JSONL file since the last call. Blocking (run it
    in a worker thread); a file that shrank (replaced) is read again from the start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read_new(self) -> list[dict[str, Any]]:
        """The records of the new complete lines; [] while the file does not exist. A line that
        is not a JSON object is skipped with a warning."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:
                    self._offset = 0
                f.seek(self._offset)
                data = f.read(size - self._offset)
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self._offset += end
        out = []
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                log.warning("api.metrics_bad_record", path=str(self.path))
                continue
            if isinstance(record, dict):
                out.append(record)
        return out


def _seconds(metric: Any) -> float | None:
    if not isinstance(metric, dict) or not isinstance(metric.get("value"), int | float):
        return None
    scale = _TO_SECONDS.get(str(metric.get("unit", "ms")))
    return None if scale is None else float(metric["value"]) * scale


class RunMetrics:
    """The api's Prometheus registry: `_ProgressCollector` plus request counters and latency
    histograms fed from `RecordTail`. `refresh` (async, file work in a thread, one at a time)
    takes in the new records; `exposition` renders the registry in the text format."""

    def __init__(self, *, view: RunView, records_path: Path) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_ProgressCollector(view))
        self._tail = RecordTail(records_path)
        self._lock = anyio.Lock()
        r = self.registry
        self.requests = Counter("aiperf_requests", "Requests with a record (success or error)",
                                ["phase"], registry=r)
        self.errors = Counter("aiperf_request_errors", "Failed requests by error type", ["phase", "error_type"],
                              registry=r)
        self.ttft = Histogram("aiperf_time_to_first_token_seconds", "Time to first token of successful requests",
                              ["phase"], buckets=LATENCY_BUCKETS_S, registry=r)
        self.latency = Histogram("aiperf_request_latency_seconds", "Request latency of successful requests",
                                 ["phase"], buckets=LATENCY_BUCKETS_S, registry=r)

    def observe(self, record: dict[str, Any]) -> None:
        """Count one exported record (the profile_export.jsonl shape)."""
        meta = record.get("metadata") or {}
        phase = str(meta.get("benchmark_phase") or _UNKNOWN)
        self.requests.labels(phase).inc()
        error = record.get("error")
        if error:
            kind = error.get("type") if isinstance(error, dict) else None
            self.errors.labels(phase, str(kind or _UNKNOWN)).inc()
            return
        metrics = record.get("metrics") or {}
        if (ttft := _seconds(metrics.get("time_to_first_token"))) is not None:
            self.ttft.labels(phase).observe(ttft)
        if (latency := _seconds(metrics.get("request_latency"))) is not None:
            self.latency.labels(phase).observe(latency)

    async def refresh(self) -> None:
        """Take in the records appended since the last refresh."""
        async with self._lock:
            for record in await anyio.to_thread.run_sync(self._tail.read_new):
                self.observe(record)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def metrics_route(metrics: RunMetrics) -> Any:
    """``GET /metrics``: refresh, then the text exposition."""

    @get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response[bytes]:
        await metrics.refresh()
        return Response(content=metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return prometheus_metrics


__all__ = ["LATENCY_BUCKETS_S", "RecordTail", "RunMetrics", "metrics_route"]
