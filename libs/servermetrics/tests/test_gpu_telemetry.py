"""GPU telemetry against a fake DCGM exporter serving dcgm-exporter's default series
(`aiperf.mock_server.dcgm`): AIPerf's reading of a scrape, its endpoints rule, the per-phase
statistics (recomputed here from the jsonl the run wrote) and the export shapes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from aiperf.config import Benchmark, CommsOptions, RunConfig, ServerMetrics
from aiperf.config import GpuTelemetry as GpuTelemetrySpec
from aiperf.messages import Event, Phase, PhaseComplete, PhaseStarted
from aiperf.mock_server.dcgm import MODEL, FakeDcgm, running_dcgm, uuid_of
from aiperf.servermetrics import HttpFetch
from aiperf.servermetrics.gpu import (
    COUNTERS,
    FINAL_SCRAPE_GRACE_NS,
    JSONL_NAME,
    METRICS,
    GpuTelemetry,
    add_to_summaries,
    dcgm_url,
    default_endpoints,
    endpoint_display,
    gpu_records,
)
from aiperf.servermetrics.manager import ServerMetricsManager
from aiperf.servermetrics.parse import parse_metrics

pytestmark = pytest.mark.anyio

C, X = "http://dcgm-a:9400/metrics", "http://dcgm-b:9400/metrics"
D1, D2 = "http://localhost:9400/metrics", "http://localhost:9401/metrics"
T0 = 1_700_000_000_000_000_000


class Clock:
    """Wall clock in ns, 0.1 s per reading; `exporter` is the fake's clock in seconds (the same)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 100_000_000
        return self.now

    def exporter(self) -> float:
        return (self.now - T0) / 1e9


class Fetch:
    """Answers each URL from its exporter; `down` URLs fail as a refused connection."""

    def __init__(self, exporters: dict[str, FakeDcgm], down: set[str]) -> None:
        self.exporters, self.down = exporters, down

    async def __call__(self, url: str, *, timeout_s: float) -> str:
        if url in self.down:
            raise ConnectionRefusedError(f"connect to {url} refused")
        return self.exporters[url].exposition()


def test_a_scrape_is_read_as_aiperfs_dcgm_collector_reads_it() -> None:
    exporter = FakeDcgm(gpus=2, static=True, pod="vllm-0")
    records = gpu_records(parse_metrics(exporter.exposition()), C, 123)
    assert [r["gpu_index"] for r in records] == [0, 1]
    first = records[0]
    assert list(first) == ["gpu_index", "gpu_uuid", "gpu_model_name", "pci_bus_id", "device", "hostname",
                           "namespace", "pod_name", "platform", "timestamp_ns", "telemetry_source_url",
                           "telemetry_data"]
    assert (first["gpu_uuid"], first["gpu_model_name"], first["device"], first["hostname"], first["pod_name"]) == (
        uuid_of(0), MODEL, "nvidia0", "gpu-node-1", "vllm-0")
    assert first["platform"] == "nvidia" and first["telemetry_source_url"] == C
    data = first["telemetry_data"]
    assert list(data) == [f for _, f, _ in METRICS if f in data]  # AIPerf's field order
    assert "nvidia_jpg_utilization" not in data  # no DCGM field feeds it
    assert data["nvidia_power_usage"] == 412.5
    assert data["nvidia_energy_consumption"] == pytest.approx(9_876_543_210 * 1e-9)  # mJ -> MJ
    assert data["nvidia_memory_used"] == pytest.approx(77_359 * 1.048576e-3)  # MiB -> GB
    assert data["nvidia_sm_utilization"] == pytest.approx(83.75)  # ratio -> %
    assert data["nvidia_power_violation"] == pytest.approx(1500.0)  # ns -> us
    assert data["nvidia_gpu_utilization"] == 87.0 and data["nvidia_temperature"] == 55.0


def test_samples_without_a_gpu_label_or_a_finite_value_are_skipped() -> None:
    text = ("# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="M"} NaN\n'
            'DCGM_FI_DEV_POWER_USAGE{UUID="GPU-b",modelName="M"} 100\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="x",UUID="GPU-c",modelName="M"} 100\n'
            "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
            'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="M"} 40\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="1",modelName="M"} 40\n')  # no UUID: left out
    (record,) = gpu_records(parse_metrics(text), C, 1)
    assert record["gpu_uuid"] == "GPU-a" and record["telemetry_data"] == {"nvidia_temperature": 40.0}


def test_endpoint_forms_and_defaults() -> None:
    assert dcgm_url("node:9400") == "http://node:9400/metrics"
    assert dcgm_url("http://node:9400/") == "http://node:9400/metrics"
    assert dcgm_url("http://node:9400/dcgm/metrics") == "http://node:9400/dcgm/metrics"
    assert endpoint_display("http://node:9400/dcgm/metrics") == "node:9400/dcgm"
    assert default_endpoints({}) == [D1, D2]
    assert default_endpoints({"AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS": "a:1,http://b:2/metrics"}) == [
        "http://a:1/metrics", "http://b:2/metrics"]
    assert default_endpoints({"AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS": '["c:3"]'}) == ["http://c:3/metrics"]
    assert GpuTelemetry.of(Benchmark(models=["m"], gpu_telemetry=GpuTelemetrySpec(enabled=False)),
                           fetch=Fetch({}, set()), artifact_dir=Path(".")) is None


async def test_a_run_exports_aiperfs_statistics_of_the_profiling_phase(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    exporters = {C: FakeDcgm(gpus=2, clock=clock.exporter), D2: FakeDcgm(gpus=1, hostname="local", static=True)}
    fetch = Fetch(exporters, down={D1, X})
    gpu = GpuTelemetry(endpoints=[C, "dcgm-b:9400", D1], defaults=[D1, D2], fetch=fetch, interval_s=0.333,
                       artifact_dir=tmp_path, wall_ns=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(gpu.run)
        tg.cancel_scope.cancel()
    assert gpu.configured == [C, X]  # D1, configured, is one of the defaults
    assert gpu.endpoints == [C, D2]  # X (configured) and D1 (a default) did not answer the first scrape
    gpu.phase_started("warmup")
    for _ in range(3):
        await gpu.collector.scrape()
    await gpu.phase_ended("warmup")
    gpu.phase_started("profiling")
    for _ in range(12):
        await gpu.collector.scrape()
    await gpu.phase_ended("profiling")
    profiling = gpu.collector.phases["profiling"]
    (tmp_path / "profile_export_aiperf.json").write_text(json.dumps(
        {"schema_version": "1.4", "request_count": {"unit": "requests", "avg": 5}, "input_config": {"x": 1},
         "was_cancelled": False}, indent=2))
    (tmp_path / "profile_export_aiperf.csv").write_text("Metric,avg\r\nRequest Count,5\r\n")
    assert await gpu.finish() == [JSONL_NAME, "profile_export_aiperf.json", "profile_export_aiperf.csv"]

    lines = [json.loads(line) for line in (tmp_path / JSONL_NAME).read_text().splitlines()]
    assert {line["telemetry_source_url"] for line in lines} == {C, D2}
    assert len([line for line in lines if line["telemetry_source_url"] == C]) == 2 * len(gpu.collector.rounds)

    doc = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert list(doc) == ["schema_version", "request_count", "telemetry_data", "input_config", "was_cancelled"]
    data = doc["telemetry_data"]
    assert list(data) == ["summary", "endpoints", "error_summary"]
    assert data["summary"]["endpoints_configured"] == [C, X, D2]
    assert data["summary"]["endpoints_successful"] == [C, D2]
    assert data["error_summary"] == [{"error_details": {"code": None, "type": "TelemetryScrapeError",
                                                        "message": f"connect to {X} refused"}, "count": 1}]
    assert list(data["endpoints"]) == ["dcgm-a:9400", "localhost:9401"]
    gpus = data["endpoints"]["dcgm-a:9400"]["gpus"]
    assert list(gpus) == ["gpu_0", "gpu_1"]
    gpu0 = gpus["gpu_0"]
    assert {k: v for k, v in gpu0.items() if k != "metrics"} == {
        "gpu_index": 0, "gpu_name": MODEL, "gpu_uuid": uuid_of(0), "platform": "nvidia", "hostname": "gpu-node-1"}
    assert list(gpu0["metrics"]) == [f for _, f, _ in METRICS if f in gpu0["metrics"]]

    # the statistics, recomputed from the jsonl: the scrapes from the phase's start to 0.666 s after its end
    ours = [line for line in lines if line["telemetry_source_url"] == C and line["gpu_index"] == 0]
    start, end = profiling.start_ns, profiling.end_ns + FINAL_SCRAPE_GRACE_NS
    window = [line for line in ours if start <= line["timestamp_ns"] <= end]
    before = [line for line in ours if line["timestamp_ns"] < start]
    assert len(window) >= 12 and before
    for name in ("nvidia_power_usage", "nvidia_gpu_utilization", "nvidia_temperature", "nvidia_sm_utilization"):
        values = np.array([line["telemetry_data"][name] for line in window])
        stats = gpu0["metrics"][name]
        assert list(stats) == ["unit", "avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min",
                               "max", "std", "count", "sum"]
        assert stats["avg"] == pytest.approx(values.mean())
        assert stats["p90"] == pytest.approx(np.percentile(values, 90))
        assert stats["std"] == pytest.approx(values.std(ddof=1))
        assert (stats["min"], stats["max"], stats["count"]) == (values.min(), values.max(), len(window))
        assert stats["sum"] == pytest.approx(values.sum())
    for name in COUNTERS & set(gpu0["metrics"]):
        expected = window[-1]["telemetry_data"][name] - before[-1]["telemetry_data"][name]
        assert gpu0["metrics"][name] == {"unit": dict((f, u) for _, f, u in METRICS)[name],
                                         "avg": pytest.approx(max(expected, 0.0))}
    assert gpu0["metrics"]["nvidia_energy_consumption"]["avg"] > 0  # the busy GPU used energy
    assert gpu0["metrics"]["nvidia_power_usage"]["unit"] == "W"

    rows = list(csv.reader(io.StringIO((tmp_path / "profile_export_aiperf.csv").read_bytes().decode())))
    assert rows[:4] == [["Metric", "avg"], ["Request Count", "5"], [], []]
    assert rows[4] == ["Endpoint", "GPU_Index", "GPU_Name", "GPU_UUID", "Platform", "Metric", "avg", "min", "max",
                       "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std", "Hostname"]
    power = next(r for r in rows[5:] if r[0] == "dcgm-a:9400" and r[1] == "0" and r[5].startswith("NVIDIA GPU Power"))
    assert power[5] == "NVIDIA GPU Power Usage (W)"
    assert power[6] == f"{gpu0['metrics']['nvidia_power_usage']['avg']:.2f}" and power[-1] == "gpu-node-1"
    energy = next(r for r in rows[5:] if r[0] == "dcgm-a:9400" and r[1] == "0" and "Energy" in r[5])
    assert energy[7:20] == [""] * 13  # a counter has its delta only


async def test_nothing_answers_nothing_is_written(tmp_path: Path) -> None:
    gpu = GpuTelemetry(endpoints=[], defaults=[D1, D2], fetch=Fetch({}, down={D1, D2}), interval_s=0.01,
                       artifact_dir=tmp_path)
    with anyio.fail_after(5):
        await gpu.run()  # returns at once: no endpoint left
    assert gpu.endpoints == []
    gpu.phase_started("profiling")
    await gpu.phase_ended("profiling")
    assert await gpu.finish() == []
    assert list(tmp_path.iterdir()) == []


async def test_an_answer_the_same_as_the_previous_is_skipped(tmp_path: Path) -> None:
    text = FakeDcgm(gpus=1, static=True).exposition()
    answers = [text, text, text.replace("412.5", "400"), text.replace("412.5", "400")]

    async def fetch(url: str, *, timeout_s: float) -> str:
        return answers.pop(0)

    gpu = GpuTelemetry(endpoints=[C], defaults=[], fetch=fetch, interval_s=1, artifact_dir=tmp_path)
    for _ in range(3):
        await gpu.collector.scrape()
    assert await gpu.finish() == [JSONL_NAME]
    lines = [json.loads(line) for line in (tmp_path / JSONL_NAME).read_text().splitlines()]
    assert [line["telemetry_data"]["nvidia_power_usage"] for line in lines] == [412.5, 400.0]


def test_summaries_that_do_not_exist_are_left_alone(tmp_path: Path) -> None:
    data: dict[str, Any] = {"summary": {}, "endpoints": {}, "error_summary": []}
    assert add_to_summaries(tmp_path, data) == []
    assert list(tmp_path.iterdir()) == []


class Events:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def recv(self) -> Event:
        if not self.events:
            await anyio.sleep_forever()
        await anyio.sleep(0.05)
        return self.events.pop(0)


async def test_the_manager_scrapes_gpus_around_the_phases_and_closes_after_the_summaries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over real HTTP: the fake exporter served by `running_dcgm` as AIPerf's default endpoint
    (nothing configured), the manager following phase events; server metrics off."""
    with running_dcgm(FakeDcgm(gpus=1, static=True)) as url:
        monkeypatch.setenv("AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS", url)
        monkeypatch.setenv("AIPERF_GPU_COLLECTION_INTERVAL", "0.05")
        benchmark = Benchmark(models=["m"], server_metrics=ServerMetrics(enabled=False))
        config = RunConfig(run_id="r", comms=CommsOptions(ipc_dir=str(tmp_path)), benchmark=benchmark,
                           artifact_dir=str(tmp_path))
        events = Events([PhaseStarted(phase=Phase.PROFILING, started_at_ns=1),
                         PhaseComplete(phase=Phase.PROFILING, issued=1, returned=1)])
        async with HttpFetch() as fetch:
            manager = ServerMetricsManager(config=config, fetch=fetch)
            with anyio.fail_after(10):
                await manager.run(events)
            assert manager.files == []  # no server metrics to export
            (tmp_path / "profile_export_aiperf.json").write_text('{"input_config": {}}')
            files = await manager.close()
    assert files == [JSONL_NAME, "profile_export_aiperf.json"]
    doc = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert doc["telemetry_data"]["summary"]["endpoints_configured"] == [url]
    (gpu,) = doc["telemetry_data"]["endpoints"][endpoint_display(url)]["gpus"].values()
    assert gpu["metrics"]["nvidia_power_usage"]["avg"] == 412.5 and gpu["metrics"]["nvidia_power_usage"]["std"] == 0
    energy = gpu["metrics"]["nvidia_energy_consumption"]["avg"]  # 1000 mJ more at every scrape
    assert energy > 0 and round(energy / 1e-6, 6).is_integer()
