"""GPU telemetry (AIPerf 0.13's `gpu_telemetry`): the Prometheus metrics of DCGM exporter
endpoints, scraped with the server-metrics collector every `AIPERF_GPU_COLLECTION_INTERVAL` s
(0.333 by default) while the run lasts, read per GPU as AIPerf reads them and exported in
AIPerf's shapes:

- `gpu_telemetry_export.jsonl`: one line per GPU per scrape (AIPerf's `TelemetryRecord`:
  `gpu_index, gpu_uuid, gpu_model_name, pci_bus_id, device, hostname, namespace, pod_name,
  platform, timestamp_ns, telemetry_source_url, telemetry_data`, absent values left out);
- `telemetry_data` in `profile_export_aiperf.json` (before `input_config`): `summary`
  (`endpoints_configured`, `endpoints_successful`, `start_time`, `end_time`), `endpoints` by
  `host:port[/path]` (the URL without scheme and `/metrics`) -> `gpus` by `gpu_<index>` ->
  `{gpu_index, gpu_name, gpu_uuid, platform, hostname, namespace, pod_name, metrics}`, and
  `error_summary`;
- the GPU table appended to `profile_export_aiperf.csv` (two blank lines, then
  `Endpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,avg,...,std[,Hostname,Namespace,Pod Name]`).

Reading a scrape (AIPerf's DCGM collector): an answer the same as the endpoint's previous one
is skipped (dcgm-exporter refreshes its values every 30 s by default); every sample with an integer `gpu` label is that
GPU's; its labels `UUID`, `modelName`, `pci_bus_id`, `device`, `Hostname`, `namespace` and
`pod` describe it (from the first sample seen); the DCGM fields of `DCGM_FIELDS` become the
record's fields, scaled to AIPerf's units (`SCALE`: mJ -> MJ, MiB -> GB, ratio -> %, ns -> us);
non-finite values are skipped. A GPU without a UUID or model name is left out.

Statistics over the profiling phase, from its start to 0.666 s after it ended (AIPerf's grace
for the trailing scrape): a gauge's `avg, p1..p99, min, max, std` (sample std, 0 below two
values), `count` and `sum` of the scrapes in that window; a counter (`COUNTERS`: energy, XID
errors, power violation) its increase from the last scrape before the window to the last in it
(never below 0), as `avg`.

Endpoints: the configured `urls` (`/metrics` appended unless they end with it) and AIPerf's
defaults (`AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS`, `http://localhost:9400/metrics` and `:9401`; a
configured URL that is one of them counts as a default).
An endpoint that does not answer the first scrape is not scraped again: silently for a default,
with a warning for a configured one (AIPerf's reachability check; the export lists it as
configured, not successful, with its error); with none left nothing is written.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import structlog

from aiperf.config import Benchmark
from aiperf.servermetrics.collector import Fetch, Round, ServerMetricsCollector
from aiperf.servermetrics.parse import Family

log = structlog.get_logger("aiperf.servermetrics.gpu")

JSONL_NAME = "gpu_telemetry_export.jsonl"
SUMMARY_JSON, SUMMARY_CSV = "profile_export_aiperf.json", "profile_export_aiperf.csv"
INTERVAL_ENV = "AIPERF_GPU_COLLECTION_INTERVAL"
DEFAULT_ENDPOINTS_ENV = "AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS"
DEFAULT_INTERVAL_S = 0.333
DEFAULT_ENDPOINTS = ("http://localhost:9400/metrics", "http://localhost:9401/metrics")
FINAL_SCRAPE_GRACE_NS = 666_000_000
PLATFORM = "nvidia"

DCGM_FIELDS = {
    "DCGM_FI_DEV_POWER_USAGE": "nvidia_power_usage",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "nvidia_energy_consumption",
    "DCGM_FI_DEV_GPU_UTIL": "nvidia_gpu_utilization",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "nvidia_memory_utilization",
    "DCGM_FI_DEV_FB_USED": "nvidia_memory_used",
    "DCGM_FI_DEV_GPU_TEMP": "nvidia_temperature",
    "DCGM_FI_DEV_ENC_UTIL": "nvidia_encoder_utilization",
    "DCGM_FI_DEV_DEC_UTIL": "nvidia_decoder_utilization",
    "DCGM_FI_PROF_SM_ACTIVE": "nvidia_sm_utilization",
    "DCGM_FI_DEV_XID_ERRORS": "nvidia_xid_errors",
    "DCGM_FI_DEV_POWER_VIOLATION": "nvidia_power_violation",
}
"""DCGM field -> AIPerf's telemetry field."""

SCALE = {"nvidia_energy_consumption": 1e-9, "nvidia_memory_used": 1.048576e-3, "nvidia_sm_utilization": 100.0,
         "nvidia_power_violation": 1e-3}
"""DCGM's units -> AIPerf's: mJ -> MJ, MiB -> GB, ratio -> %, ns -> us."""

METRICS: tuple[tuple[str, str, str], ...] = (
    ("NVIDIA GPU Power Usage", "nvidia_power_usage", "W"),
    ("NVIDIA Energy Consumption", "nvidia_energy_consumption", "MJ"),
    ("NVIDIA GPU Utilization", "nvidia_gpu_utilization", "%"),
    ("NVIDIA Memory Utilization", "nvidia_memory_utilization", "%"),
    ("NVIDIA GPU Memory Used", "nvidia_memory_used", "GB"),
    ("NVIDIA GPU Temperature", "nvidia_temperature", "°C"),
    ("NVIDIA SM Utilization", "nvidia_sm_utilization", "%"),
    ("NVIDIA Decoder Utilization", "nvidia_decoder_utilization", "%"),
    ("NVIDIA Encoder Utilization", "nvidia_encoder_utilization", "%"),
    ("NVIDIA JPEG Utilization", "nvidia_jpg_utilization", "%"),
    ("NVIDIA XID Errors", "nvidia_xid_errors", "count"),
    ("NVIDIA Power Violation", "nvidia_power_violation", "us"),
)
"""AIPerf's GPU metrics (display name, field, unit), in its order (the record's field order)."""

COUNTERS = frozenset({"nvidia_energy_consumption", "nvidia_xid_errors", "nvidia_power_violation"})
STAT_KEYS = ("avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std")
_JSON_ORDER = ("avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max", "std",
               "count", "sum")
_LABELS = (("gpu_uuid", "UUID"), ("gpu_model_name", "modelName"), ("pci_bus_id", "pci_bus_id"),
           ("device", "device"), ("hostname", "Hostname"), ("namespace", "namespace"), ("pod_name", "pod"))


def dcgm_url(url: str) -> str:
    """AIPerf's form of a DCGM endpoint: `http://` when it has no scheme, `/metrics` at the end."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    return url if url.endswith("/metrics") else f"{url}/metrics"


def default_endpoints(environ: Mapping[str, str] = os.environ) -> list[str]:
    """AIPerf's default DCGM endpoints (`AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS`: comma-separated or
    a JSON list)."""
    given = environ.get(DEFAULT_ENDPOINTS_ENV, "").strip()
    if not given:
        return list(DEFAULT_ENDPOINTS)
    items = json.loads(given) if given.startswith("[") else given.split(",")
    return [dcgm_url(str(u)) for u in items if str(u).strip()]


def collection_interval(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between scrapes (`AIPERF_GPU_COLLECTION_INTERVAL`, 0.01..300, default 0.333)."""
    try:
        value = float(environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return min(max(value, 0.01), 300.0)


def endpoint_display(url: str) -> str:
    """`host:port[/path]` of a telemetry URL, its `/metrics` left out (AIPerf's endpoint key)."""
    parts = urlsplit(url)
    return parts.netloc + parts.path.removesuffix("/metrics")


def gpu_records(families: Mapping[str, Family], url: str, timestamp_ns: int) -> list[dict[str, Any]]:
    """AIPerf's telemetry records of one scrape of `url` (see the module doc), by GPU index."""
    metadata: dict[int, dict[str, Any]] = {}
    values: dict[int, dict[str, float]] = {}
    for family in families.values():
        name = family.name.removesuffix("_total")
        target = DCGM_FIELDS.get(name)
        for key, value in family.series.items():
            labels = dict(key)
            try:
                index = int(labels["gpu"])
            except (KeyError, ValueError):
                continue
            if not isinstance(value, float) or not math.isfinite(value):
                continue
            metadata.setdefault(index, {k: labels.get(label) for k, label in _LABELS})
            if target is not None:
                values.setdefault(index, {})[target] = value * SCALE.get(target, 1.0)
    out = []
    for index, data in values.items():
        meta = metadata[index]
        if not meta["gpu_uuid"] or not meta["gpu_model_name"]:
            continue
        record: dict[str, Any] = {"gpu_index": index}
        record.update((k, v) for k, v in meta.items() if v is not None)
        record.update(platform=PLATFORM, timestamp_ns=timestamp_ns, telemetry_source_url=url,
                      telemetry_data={f: data[f] for _, f, _ in METRICS if f in data})
        out.append(record)
    return out


@dataclass
class _Series:
    """One GPU's scrapes: when, and each field's value (NaN where a scrape lacked it)."""

    metadata: dict[str, Any]
    times: list[int] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, timestamp_ns: int, data: Mapping[str, float]) -> None:
        n = len(self.times)
        self.times.append(timestamp_ns)
        for name in set(self.values) | set(data):
            column = self.values.setdefault(name, [math.nan] * n)
            column.append(data.get(name, math.nan))


def metric_stats(times: Sequence[int], values: Sequence[float], start_ns: int | None, end_ns: int | None,
                 *, counter: bool, unit: str) -> dict[str, Any] | None:
    """One metric's stats over `[start_ns, end_ns]` (see the module doc), AIPerf's JSON keys; None
    when the window holds no value."""
    import numpy as np  # not at import: the CLI's process runs the collector and never loads numpy

    ts, vs = np.asarray(times, dtype=np.int64), np.asarray(values, dtype=float)
    inside = np.ones(ts.size, dtype=bool)
    if start_ns is not None:
        inside &= ts >= start_ns
    if end_ns is not None:
        inside &= ts <= end_ns
    window = vs[inside]
    valid = window[~np.isnan(window)]
    if valid.size == 0:
        return None
    if counter:
        before = vs[: int(np.argmax(inside))] if start_ns is not None else vs[:0]
        before = before[~np.isnan(before)]
        reference = float(before[-1]) if before.size else float(valid[0])
        return {"unit": unit, "avg": max(float(valid[-1]) - reference, 0.0)}
    pct = np.percentile(valid, (1, 5, 10, 25, 50, 75, 90, 95, 99))
    stats = {"avg": float(np.mean(valid)), **{f"p{p}": float(v) for p, v in
                                              zip((1, 5, 10, 25, 50, 75, 90, 95, 99), pct, strict=True)},
             "min": float(np.min(valid)), "max": float(np.max(valid)),
             "std": float(np.std(valid, ddof=1)) if valid.size > 1 else 0.0,
             "count": int(window.size), "sum": float(np.sum(valid))}
    return {"unit": unit, **{k: stats[k] for k in _JSON_ORDER}}


class GpuTelemetry:
    """See the module doc. `endpoints`: the configured URLs (normalized here); `defaults`:
    AIPerf's default endpoints (tried, kept when they answer). `run` scrapes until cancelled;
    `phase_started`/`phase_ended` mark the phases (as the server-metrics collector does);
    `finish` takes the last scrape and writes the exports into `artifact_dir`."""

    def __init__(self, *, endpoints: Sequence[str], defaults: Sequence[str], fetch: Fetch, interval_s: float,
                 artifact_dir: Path, profiling: str = "profiling", wall_ns: Callable[[], int] = time.time_ns) -> None:
        self._defaults = list(dict.fromkeys(dcgm_url(u) for u in defaults))
        self.configured = [u for u in dict.fromkeys(dcgm_url(u) for u in endpoints) if u not in self._defaults]
        self._dir, self._profiling, self._interval = artifact_dir, profiling, interval_s
        self._fetch, self._last_text = fetch, dict[str, str]()
        self.collector = ServerMetricsCollector(endpoints=[*self.configured, *self._defaults], fetch=self._fresh,
                                                interval_s=interval_s, wall_ns=wall_ns, on_round=self._take,
                                                keep_families=False, warn_failures=False)
        self._series: dict[tuple[str, str], _Series] = {}
        self._answered: set[str] = set()
        self._errors: dict[str, int] = {}
        self._jsonl: IO[bytes] | None = None
        self.files: list[str] = []

    @classmethod
    def of(cls, benchmark: Benchmark, *, fetch: Fetch, artifact_dir: Path,
           environ: Mapping[str, str] = os.environ) -> GpuTelemetry | None:
        """The run's GPU telemetry, None when `gpu_telemetry.enabled` is false."""
        spec = benchmark.gpu_telemetry
        if not spec.enabled:
            return None
        return cls(endpoints=spec.urls, defaults=default_endpoints(environ), fetch=fetch,
                   interval_s=collection_interval(environ), artifact_dir=artifact_dir)

    @property
    def endpoints(self) -> list[str]:
        """The endpoints being scraped (after the first scrape: those that answered it)."""
        return self.collector.endpoints

    async def _fresh(self, url: str, *, timeout_s: float) -> str:
        """`url`'s text, or "" (no samples) when it is the same as at its previous scrape (AIPerf
        skips a scrape whose answer did not change: dcgm-exporter refreshes its values on its
        own period, 30 s by default)."""
        text = await self._fetch(url, timeout_s=timeout_s)
        if self._last_text.get(url) == text:
            return ""
        self._last_text[url] = text
        return text

    def _take(self, taken: Round) -> None:
        lines = []
        for url, result in taken.results.items():
            if not isinstance(result, dict):
                if url in self.configured:  # a default that does not answer is dropped, not an error
                    self._errors[result] = self._errors.get(result, 0) + 1
                continue
            self._answered.add(url)
            for record in gpu_records(result, url, taken.recv_ns):
                series = self._series.get((url, record["gpu_uuid"]))
                if series is None:
                    meta = {k: v for k, v in record.items() if k not in ("timestamp_ns", "telemetry_data")}
                    series = self._series[(url, record["gpu_uuid"])] = _Series(meta)
                series.add(taken.recv_ns, record["telemetry_data"])
                lines.append(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        if lines:
            self._write_lines(lines)

    def _write_lines(self, lines: list[bytes]) -> None:
        try:
            if self._jsonl is None:
                self._dir.mkdir(parents=True, exist_ok=True)
                self._jsonl = open(self._dir / JSONL_NAME, "ab")  # noqa: SIM115 (closed by finish)
            self._jsonl.writelines(lines)
        except OSError as exc:
            log.warning("gpu_telemetry.jsonl_failed", dir=str(self._dir), error=str(exc))

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The first scrape (which decides the endpoints kept), then (started) one every interval
        until cancelled; returns at once when no endpoint is left."""
        await self.collector.scrape()
        first = self.collector.rounds[-1].results
        kept = [u for u in self.collector.endpoints if isinstance(first.get(u), dict)]
        for url in self.configured:
            if not isinstance(first.get(url), dict):
                log.warning("gpu_telemetry.unreachable", endpoint=url, error=first.get(url),
                            note="not scraped; the benchmark goes on")
        self.collector.endpoints = kept
        task_status.started()
        if not kept:
            return
        while True:
            await anyio.sleep(self._interval)
            await self.collector.scrape()

    def phase_started(self, name: str, *, at_ns: int | None = None) -> None:
        if self.collector.endpoints:
            self.collector.phase_started(name, at_ns=at_ns)

    async def phase_ended(self, name: str) -> None:
        if self.collector.endpoints:
            await self.collector.phase_ended(name)

    def telemetry_data(self) -> dict[str, Any]:
        """The `telemetry_data` object (see the module doc) of what was scraped."""
        phase = self.collector.phases.get(self._profiling)
        start = phase.start_ns if phase is not None else None
        end = phase.end_ns + FINAL_SCRAPE_GRACE_NS if phase is not None and phase.end_ns is not None else None
        rounds = self.collector.rounds
        shown = [*self.configured, *(u for u in self._defaults if u in self._answered)]
        endpoints: dict[str, Any] = {}
        for (url, uuid), series in self._series.items():
            metrics = {}
            for _, name, unit in METRICS:
                if name in series.values:
                    stats = metric_stats(series.times, series.values[name], start, end,
                                         counter=name in COUNTERS, unit=unit)
                    if stats is not None:
                        metrics[name] = stats
            meta = series.metadata
            gpu = {"gpu_index": meta["gpu_index"], "gpu_name": meta["gpu_model_name"], "gpu_uuid": uuid,
                   "platform": meta["platform"],
                   **{k: meta[m] for k, m in (("hostname", "hostname"), ("namespace", "namespace"),
                                              ("pod_name", "pod_name")) if meta.get(m) is not None},
                   "metrics": metrics}
            gpus = endpoints.setdefault(endpoint_display(url), {"gpus": {}})["gpus"]
            gpus[f"gpu_{meta['gpu_index']}"] = gpu
        return {
            "summary": {"endpoints_configured": shown,
                        "endpoints_successful": [u for u in shown if u in self._answered],
                        "start_time": _iso(start or (rounds[0].sent_ns if rounds else None)),
                        "end_time": _iso(end - FINAL_SCRAPE_GRACE_NS if end else
                                         (rounds[-1].recv_ns if rounds else None))},
            "endpoints": endpoints,
            "error_summary": [{"error_details": {"code": None, "type": "TelemetryScrapeError", "message": message},
                               "count": count} for message, count in self._errors.items()],
        }

    async def finish(self) -> list[str]:
        """The last scrape, then the exports: the jsonl closed, `telemetry_data` added to the
        summary files when they exist. Never raises for an unwritable file (logged)."""
        try:
            if self.collector.endpoints:
                with anyio.CancelScope(shield=True):
                    await self.collector.finish()
        finally:
            if self._jsonl is not None:
                try:
                    self._jsonl.close()
                except OSError as exc:
                    log.warning("gpu_telemetry.jsonl_failed", dir=str(self._dir), error=str(exc))
                self._jsonl = None
                self.files.append(JSONL_NAME)
        if not self._series and not self.configured:
            return self.files
        data = self.telemetry_data()
        try:
            self.files += await anyio.to_thread.run_sync(add_to_summaries, self._dir, data)
        except OSError as exc:
            log.warning("gpu_telemetry.export_failed", dir=str(self._dir), error=str(exc))
        return self.files


def _iso(ns: int | None) -> str | None:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat() if ns else None


def _number(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{float(value):.2f}"


def telemetry_csv(data: Mapping[str, Any]) -> str:
    """The GPU table AIPerf appends to `profile_export_aiperf.csv` (see the module doc)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([])
    writer.writerow([])
    gpus = [(name, gpu) for name, ep in data["endpoints"].items() for gpu in ep["gpus"].values()]
    optional = [(header, key) for header, key in (("Hostname", "hostname"), ("Namespace", "namespace"),
                                                  ("Pod Name", "pod_name"))
                if any(gpu.get(key) is not None for _, gpu in gpus)]
    writer.writerow(["Endpoint", "GPU_Index", "GPU_Name", "GPU_UUID", "Platform", "Metric", *STAT_KEYS,
                     *(h for h, _ in optional)])
    for endpoint, gpu in gpus:
        for display, name, unit in METRICS:
            stats = gpu["metrics"].get(name)
            if stats is None:
                continue
            writer.writerow([endpoint, str(gpu["gpu_index"]), gpu["gpu_name"], gpu["gpu_uuid"], gpu["platform"],
                             f"{display} ({unit})", *(_number(stats.get(k)) for k in STAT_KEYS),
                             *(str(gpu.get(key)) for _, key in optional)])
    return buf.getvalue()


def add_to_summaries(directory: Path, data: Mapping[str, Any]) -> list[str]:
    """`telemetry_data` into `profile_export_aiperf.json` (before `input_config`) and the GPU
    table appended to `profile_export_aiperf.csv`, each when the file exists (atomically);
    returns the names changed. Raises `OSError`."""
    from aiperf.metrics.atomic import write_atomic

    changed = []
    summary = directory / SUMMARY_JSON
    if summary.exists():
        doc = json.loads(summary.read_text())
        out: dict[str, Any] = {}
        for key, value in doc.items():
            if key == "input_config":
                out["telemetry_data"] = data
            if key != "telemetry_data":
                out[key] = value
        out.setdefault("telemetry_data", data)
        write_atomic(summary, (json.dumps(out, indent=2, ensure_ascii=False) + "\n").encode())
        changed.append(SUMMARY_JSON)
    table = directory / SUMMARY_CSV
    if table.exists():
        text = table.read_bytes().decode()
        write_atomic(table, (text + telemetry_csv(data)).encode())
        changed.append(SUMMARY_CSV)
    return changed
