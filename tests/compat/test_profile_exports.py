"""What a run writes, as AIPerf 0.13.0 writes it: one config file run by AIPerf's `aiperf profile`
and by ours against the mock, with

- `gpuTelemetry` (a fake DCGM exporter serving dcgm-exporter's default series,
  `aiperf.mock_server.dcgm`, its gauges fixed and its counters growing by a fixed step per
  scrape): the same `telemetry_data` in `profile_export_aiperf.json` (keys, GPUs, metadata,
  metrics, units and every statistic of the fixed gauges; how many scrapes fell in the phase,
  hence a gauge's `count` and `sum` and a counter's increase, depends on the run's timing), the
  same `gpu_telemetry_export.jsonl` lines (but their timestamps) and the same GPU table in
  `profile_export_aiperf.csv` (but those cells);
- `artifacts.userFiles` (json, yaml and text, with variables and the run's names): the same
  files, but the run's start time and folder;
- `artifacts.sliceDuration`: time-sliced files of the same shape (their metrics ours)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _oracle import Oracle, find_oracle

from aiperf.mock_server.dcgm import FakeDcgm, running_dcgm
from aiperf.mock_server.testing import running_mock

NOWHERE = "http://127.0.0.1:9/metrics"
"""AIPerf's default DCGM endpoints (localhost:9400/9401) replaced, for both tools, by a port no one serves."""


def _ours(config: Path, artifacts: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS": NOWHERE}
    return subprocess.run([sys.executable, "-m", "aiperf.cli", "profile", "--config", str(config), "--artifact-dir",
                           str(artifacts)], capture_output=True, text=True, env=env, timeout=300, check=False)


def _gpu_table(path: Path) -> list[list[str]]:
    """The GPU table, a counter's increase and a gauge's sum (timing-dependent) masked."""
    rows = list(csv.reader(io.StringIO(path.read_bytes().decode())))
    start = next(i for i, row in enumerate(rows) if row[:2] == ["Endpoint", "GPU_Index"])
    header, *body = rows[start:]
    masked = [header]
    for row in body:
        row = list(row)
        row[header.index("sum")] = "-"
        if row[header.index("min")] == "":  # a counter: its increase only
            assert float(row[header.index("avg")]) >= 0
            row[header.index("avg")] = "-"
        masked.append(row)
    return masked


def _timeless(data: dict[str, Any]) -> dict[str, Any]:
    """`telemetry_data` without what depends on the run's timing (see the module doc)."""
    gpus = {}
    for endpoint, entry in data["endpoints"].items():
        for key, gpu in entry["gpus"].items():
            metrics = {}
            for name, stats in gpu["metrics"].items():
                if "count" in stats:
                    assert stats["count"] >= 1
                    stats = {k: v for k, v in stats.items() if k not in ("count", "sum")}
                else:
                    assert set(stats) == {"unit", "avg"} and stats["avg"] >= 0
                    stats = {"unit": stats["unit"]}
                metrics[name] = stats
            gpus[(endpoint, key)] = {**gpu, "metrics": metrics}
    return {"summary": {k: v for k, v in data["summary"].items() if not k.endswith("_time")},
            "gpus": gpus, "error_summary": data["error_summary"]}


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return find_oracle()


USER_FILES = [
    {"path": "input_config.json", "content": {"scenario": "{{ label }}", "gpus": "{{ gpus }}", "total": "{{ total }}",
                                              "model": "{{ model }}", "endpoint": "{{ endpoint_url }}",
                                              "run": {"job": "{{ job_name }}", "ns": "{{ namespace }}",
                                                      "epoch": "{{ epoch }}"}, "literal": "42"}},
    {"path": "meta/run.yaml", "format": "yaml",
     "content": {"run_id": "{{ job_name }}-{{ epoch }}", "dir": "{{ artifact_dir }}", "tags": ["{{ label }}", "x"]}},
    {"path": "README.md", "content": "# {{ job_name }} ({{ label }})\n- {{ total }} users on {{ model }}\n"},
]


def _user_files(run: Path) -> dict[str, str]:
    """The user files of a run folder, its start time and folder masked."""
    out = {}
    for name in ("input_config.json", "meta/run.yaml", "README.md"):
        text = (run / name).read_text()
        text = re.sub(r"\b1[0-9]{9}\b", "EPOCH", text).replace(str(run.resolve()), "RUN_DIR")
        out[name] = text
    return out


def test_a_runs_exports_are_aiperfs(oracle: Oracle, tmp_path: Path) -> None:
    tokenizer = oracle.make_tokenizer(tmp_path / "tokenizer")
    with running_mock("--ttft-ms", "10", "--itl-ms", "1", "--output-tokens", "8") as server, \
            running_dcgm(exporter := FakeDcgm(gpus=2, static=True, pod="vllm-0")) as dcgm:
        config = tmp_path / "gpu.yaml"
        config.write_text(yaml.safe_dump({"benchmark": {
            "model": "mock", "endpoint": {"url": server.url, "streaming": True},
            "tokenizer": {"name": str(tokenizer)},
            "dataset": {"type": "synthetic", "entries": 10, "prompts": {"isl": 16, "osl": 8}},
            "profiling": {"type": "concurrency", "concurrency": 2, "requests": 20},
            "gpuTelemetry": {"urls": [dcgm]},
            "artifacts": {"sliceDuration": 0.25, "userFiles": USER_FILES},
            "runtime": {"workers": 1, "recordProcessors": 1}},
            "variables": {"label": "dense", "gpus": 4, "total": "{{ gpus * 8 }}"}}))
        theirs_dir, ours_dir = tmp_path / "theirs" / "run", tmp_path / "ours" / "run"
        theirs = oracle.run("profile", "--config", str(config), "--ui-type", "none", "--artifact-dir",
                            str(theirs_dir), cwd=tmp_path, timeout=300,
                            # offline, AIPerf's record-processor takes the folder for a Hub repo id
                            env={"AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS": NOWHERE, "HF_HUB_OFFLINE": None})
        assert theirs.returncode == 0, (theirs.stdout + theirs.stderr)[-3000:]
        exporter.reset()
        ours = _ours(config, ours_dir)
        assert ours.returncode == 0, ours.stderr[-3000:]

    expected = json.loads((theirs_dir / "profile_export_aiperf.json").read_text())["telemetry_data"]
    got = json.loads((ours_dir / "profile_export_aiperf.json").read_text())["telemetry_data"]
    assert _timeless(got) == _timeless(expected)
    assert got["endpoints"]["127.0.0.1:" + dcgm.split(":")[2].split("/")[0]]["gpus"]["gpu_0"]["metrics"][
        "nvidia_power_usage"]["avg"] == 412.5

    def lines(folder: Path) -> list[dict[str, Any]]:
        out = [json.loads(line) for line in (folder / "gpu_telemetry_export.jsonl").read_text().splitlines()]
        # a line's counter reads how many scrapes the exporter answered before (AIPerf probes first)
        return [{**{k: v for k, v in line.items() if k != "timestamp_ns"}, "telemetry_data": {
            k: v for k, v in line["telemetry_data"].items() if k != "nvidia_energy_consumption"}} for line in out]

    first_theirs, first_ours = lines(theirs_dir)[:2], lines(ours_dir)[:2]
    assert first_ours == first_theirs
    assert _gpu_table(ours_dir / "profile_export_aiperf.csv") == _gpu_table(theirs_dir / "profile_export_aiperf.csv")

    assert _user_files(ours_dir) == _user_files(theirs_dir)
    assert json.loads((ours_dir / "input_config.json").read_text())["total"] == 32

    slices = {name: json.loads((d / "profile_export_aiperf_timeslices.json").read_text())
              for name, d in (("theirs", theirs_dir), ("ours", ours_dir))}
    assert list(slices["ours"]) == list(slices["theirs"]) == ["timeslices", "input_config"]
    ours_slice, their_slice = slices["ours"]["timeslices"][0], slices["theirs"]["timeslices"][0]
    assert list(ours_slice)[:2] == list(their_slice)[:2] == ["start_ns", "end_ns"]
    shared = set(ours_slice) & set(their_slice) - {"start_ns", "end_ns", "is_complete"}
    assert {"request_latency", "request_count", "request_throughput"} <= shared
    assert all(set(ours_slice[t]) <= set(their_slice[t]) | {"count"} for t in shared)
    header = "Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value"
    assert (ours_dir / "profile_export_aiperf_timeslices.csv").read_text().splitlines()[0] == header
    assert (theirs_dir / "profile_export_aiperf_timeslices.csv").read_text().splitlines()[0] == header
