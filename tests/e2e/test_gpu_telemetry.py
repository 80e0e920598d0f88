"""GPU telemetry and time-sliced exports in a real `aiperf profile` (issue 21): an AIPerf config
file with `gpu_telemetry` (a fake DCGM exporter, `aiperf.mock_server.dcgm`) and
`artifacts.slice_duration`, run against the mock, writes AIPerf's files."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from e2e._harness import aiperf

from aiperf.mock_server.dcgm import FakeDcgm, running_dcgm, uuid_of
from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def test_a_config_file_with_gpu_telemetry_and_slices_writes_aiperfs_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS", "http://127.0.0.1:9/metrics")  # nothing listens
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "20", "--itl-ms", "2", "--output-tokens", "8") as server, \
            running_dcgm(FakeDcgm(gpus=2)) as dcgm:
        config = tmp_path / "gpu.yaml"
        config.write_text(yaml.safe_dump({"benchmark": {
            "model": "mock", "endpoint": {"url": server.url, "streaming": True},
            "dataset": {"type": "synthetic", "entries": 20, "prompts": {"isl": 32, "osl": 8}},
            "profiling": {"type": "concurrency", "concurrency": 4, "requests": 60},
            "artifacts": {"sliceDuration": "0.2s"},
            "gpuTelemetry": {"urls": [dcgm.removesuffix("/metrics")]},
            "runtime": {"workers": 2, "recordProcessors": 1}}}))
        run = aiperf("profile", "--config", str(config), artifacts=artifacts)
    assert run.code == 0, run.stderr[-3000:]

    lines = [json.loads(line) for line in (artifacts / "gpu_telemetry_export.jsonl").read_text().splitlines()]
    assert {line["gpu_uuid"] for line in lines} == {uuid_of(0), uuid_of(1)}
    assert {line["telemetry_source_url"] for line in lines} == {dcgm}
    doc = run.summary()
    data = doc["telemetry_data"]
    assert list(doc).index("telemetry_data") == list(doc).index("input_config") - 1
    assert data["summary"]["endpoints_configured"] == [dcgm] == data["summary"]["endpoints_successful"]
    gpus = data["endpoints"][dcgm.removeprefix("http://").removesuffix("/metrics")]["gpus"]
    assert sorted(gpus) == ["gpu_0", "gpu_1"]
    power = gpus["gpu_0"]["metrics"]["nvidia_power_usage"]
    assert power["unit"] == "W" and 90 <= power["min"] <= power["avg"] <= power["max"] <= 690 and power["count"] >= 1
    assert gpus["gpu_0"]["metrics"]["nvidia_energy_consumption"]["avg"] >= 0
    rows = list(csv.reader(io.StringIO((artifacts / "profile_export_aiperf.csv").read_bytes().decode())))
    assert ["Endpoint", "GPU_Index", "GPU_Name", "GPU_UUID", "Platform", "Metric"] == rows[
        next(i for i, r in enumerate(rows) if r[:1] == ["Endpoint"])][:6]

    slices = json.loads((artifacts / "profile_export_aiperf_timeslices.json").read_text())
    assert sum(ts["request_count"]["avg"] for ts in slices["timeslices"]) == 60
    assert all(ts["end_ns"] - ts["start_ns"] <= 200_000_000 for ts in slices["timeslices"])
    assert (artifacts / "profile_export_aiperf_timeslices.csv").read_text().startswith(
        "Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value")
