"""`--export-level summary|records|raw` (AIPerf 0.13): which files a run writes, and the raw
barrier (issue 10, item 15): the raw records of every record-processor are made durable, their
sizes acknowledged and joined into profile_export_raw.jsonl before the results-ready marker; a
failed barrier fails the run (exit 1, one line) and withholds the marker."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from e2e._harness import aiperf

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

MARKER = ".aiperf_results_ready.json"
WARMUP, REQUESTS = 4, 24


def _profile(server_url: str, artifacts: Path, level: str) -> list[str]:
    return ["profile", "--model", "mock", "--url", server_url, "--streaming", "--concurrency", "4",
            "--request-count", str(REQUESTS), "--warmup-request-count", str(WARMUP), "--workers-max", "2",
            "--record-processors", "2", "--export-level", level]


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]


def test_summary_writes_the_aggregate_exports_only(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "8") as server:
        run = aiperf(*_profile(server.url, artifacts, "summary"), artifacts=artifacts)
    assert run.code == 0, run.stderr[-2000:]
    assert run.accounting()["accounting_balanced"]
    written = {p.name for p in artifacts.iterdir()}
    assert {"profile_export_aiperf.json", "profile_export_aiperf.csv", "inputs.json", MARKER} <= written
    assert not {"profile_export.jsonl", "profile_export_raw.jsonl", "raw"} & written, written


def test_raw_writes_one_line_per_request_before_the_marker(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "8") as server:
        run = aiperf(*_profile(server.url, artifacts, "raw"), artifacts=artifacts)
    assert run.code == 0, run.stderr[-2000:]
    assert "profile_export_raw.jsonl" in run.stdout
    lines = [orjson.loads(line) for line in (artifacts / "profile_export_raw.jsonl").read_bytes().splitlines()]
    keys = sorted((line["metadata"]["benchmark_phase"], line["metadata"]["credit_num"]) for line in lines)
    assert keys == sorted([("warmup", n) for n in range(WARMUP)] + [("profiling", n) for n in range(REQUESTS)])
    for line in lines:
        assert line["status"] == 200 and line["responses"], line
        assert all(r["perf_ns"] >= line["start_perf_ns"] for r in line["responses"])
        assert "data: " in "".join(r["text"] for r in line["responses"])
    assert len(run.records()) == WARMUP + REQUESTS  # raw includes records
    assert (artifacts / MARKER).exists()
    assert not (artifacts / "raw").exists()  # the parts were joined and removed
    assert not [p for p in artifacts.rglob(".*") if p.name != MARKER], "staging files left"


def test_a_failed_raw_barrier_withholds_the_marker(tmp_path: Path) -> None:
    """The join cannot publish profile_export_raw.jsonl (a folder is in its way): the run fails
    with one line naming the raw records, and no results-ready marker is written."""
    artifacts = tmp_path / "a"
    (artifacts / "profile_export_raw.jsonl").mkdir(parents=True)
    with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "8") as server:
        run = aiperf(*_profile(server.url, artifacts, "raw"), artifacts=artifacts)
    assert run.code == 1, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    errors = _errors(run.stderr)
    assert len(errors) == 1 and "raw records not finalized" in errors[0], errors
    assert not (artifacts / MARKER).exists()
