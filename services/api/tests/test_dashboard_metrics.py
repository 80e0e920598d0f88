"""The api's dashboard (pages, JSON adapter, jobPhase) and its Prometheus /metrics, on a running
`Api` fed by a fake event source and real files in its artifact directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from aiperf.api.prom import RecordTail
from aiperf.messages import (
    Phase,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    ServiceFailed,
    ServiceType,
    SystemState,
    SystemStateChanged,
)
from tests._api_fakes import Serving

pytestmark = pytest.mark.anyio


def record(phase: str, *, ttft_ms: float | None = None, latency_ms: float | None = None,
           error: dict[str, Any] | None = None) -> bytes:
    """One profile_export.jsonl line in AIPerf's shape."""
    doc: dict[str, Any] = {"metadata": {"benchmark_phase": phase, "worker_id": "w0"}, "metrics": {}}
    if ttft_ms is not None:
        doc["metrics"]["time_to_first_token"] = {"value": ttft_ms, "unit": "ms"}
    if latency_ms is not None:
        doc["metrics"]["request_latency"] = {"value": latency_ms, "unit": "ms"}
    if error is not None:
        doc["error"] = error
    return json.dumps(doc).encode() + b"\n"


async def scrape(http: aiohttp.ClientSession, base: str) -> dict[str, list[Sample]]:
    async with http.get(f"{base}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: dict[str, list[Sample]], family: str, sample: str, **labels: str) -> float:
    found = [s.value for s in samples[family] if s.name == sample and all(s.labels.get(k) == v
                                                                        for k, v in labels.items())]
    assert len(found) == 1, (family, sample, labels, samples.get(family))
    return found[0]


async def test_metrics_count_progress_requests_errors_and_latencies(serving: Serving) -> None:
    async with serving() as run:
        jsonl = run.artifact_dir / "profile_export.jsonl"
        await run.feed(PhaseStarted(phase=Phase.PROFILING, started_at_ns=1, expected_credits=4))
        await run.feed(Progress(phase=Phase.PROFILING, completed=2, errors=1, expected=4))
        first = await scrape(run.http, run.base)
        assert value(first, "aiperf_phase_requests_completed", "aiperf_phase_requests_completed",
                     phase="profiling") == 2
        assert value(first, "aiperf_phase_requests_expected", "aiperf_phase_requests_expected",
                     phase="profiling") == 4
        assert not first["aiperf_phase_requests_sent"]  # not known before sending completes
        assert not first["aiperf_requests"]  # no records file yet
        # Two whole records and half of a third: only whole lines count.
        third = record("profiling", ttft_ms=2000.0, latency_ms=3000.0)
        jsonl.write_bytes(record("profiling", ttft_ms=40.0, latency_ms=120.0)
                          + record("profiling", error={"code": 500, "type": "Internal Server Error",
                                                       "message": "boom"})
                          + third[:10])
        second = await scrape(run.http, run.base)
        assert value(second, "aiperf_requests", "aiperf_requests_total", phase="profiling") == 2
        assert value(second, "aiperf_request_errors", "aiperf_request_errors_total", phase="profiling",
                     error_type="Internal Server Error") == 1
        assert value(second, "aiperf_time_to_first_token_seconds", "aiperf_time_to_first_token_seconds_count",
                     phase="profiling") == 1
        assert value(second, "aiperf_time_to_first_token_seconds", "aiperf_time_to_first_token_seconds_bucket",
                     phase="profiling", le="0.05") == 1
        assert value(second, "aiperf_time_to_first_token_seconds", "aiperf_time_to_first_token_seconds_bucket",
                     phase="profiling", le="0.025") == 0
        with jsonl.open("ab") as f:
            f.write(third[10:] + record("warmup", ttft_ms=1.0, latency_ms=5.0))
        await run.feed(PhaseSendingComplete(phase=Phase.PROFILING, issued=4, at_ns=2))
        third_scrape = await scrape(run.http, run.base)
        assert value(third_scrape, "aiperf_requests", "aiperf_requests_total", phase="profiling") == 3
        assert value(third_scrape, "aiperf_requests", "aiperf_requests_total", phase="warmup") == 1
        assert value(third_scrape, "aiperf_request_latency_seconds", "aiperf_request_latency_seconds_sum",
                     phase="profiling") == pytest.approx(3.12)
        assert value(third_scrape, "aiperf_request_latency_seconds", "aiperf_request_latency_seconds_bucket",
                     phase="profiling", le="2.5") == 1
        assert value(third_scrape, "aiperf_phase_requests_sent", "aiperf_phase_requests_sent",
                     phase="profiling") == 4


def test_record_tail_starts_over_when_the_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tail = RecordTail(path)
    assert tail.read_new() == []
    path.write_bytes(record("profiling", ttft_ms=1.0) * 3)
    assert len(tail.read_new()) == 3 and tail.read_new() == []
    path.write_bytes(record("warmup", ttft_ms=1.0))
    assert [r["metadata"]["benchmark_phase"] for r in tail.read_new()] == ["warmup"]


async def test_live_job_adapter_and_pages(serving: Serving) -> None:
    async with serving() as run:
        async with run.http.get(f"{run.base}/dashboard/") as page:
            assert page.status == 200 and 'data-page="index"' in await page.text()
        async with run.http.get(f"{run.base}/dashboard/static/vendor/uPlot.iife.min.js") as asset:
            assert asset.status == 200
        name = run.artifact_dir.name
        async with run.http.get(f"{run.base}/api/dashboard/jobs") as response:
            jobs = (await response.json())["items"]
        assert [(j["namespace"], j["name"], j["runs"], j["phase"]) for j in jobs] == [("local", name, 1, "starting")]
        await run.feed(PhaseStarted(phase=Phase.PROFILING, started_at_ns=5, expected_credits=10))
        await run.feed(Progress(phase=Phase.PROFILING, completed=4, errors=1, expected=10))
        async with run.http.get(f"{run.base}/api/dashboard/jobs") as response:
            job = (await response.json())["items"][0]
        assert job["phase"] == "profiling"
        assert job["progress"] == {"phase": "profiling", "completed": 4, "expected": 10, "errors": 1}
        (run.artifact_dir / "profile_export.jsonl").write_text("{}\n")
        async with run.http.get(f"{run.base}/api/dashboard/jobs/local/{name}/runs") as response:
            runs = (await response.json())["items"]
        assert runs == [{"epoch": job["latestEpoch"], "phase": "profiling", "completedAt": None,
                         "files": [{"name": "profile_export.jsonl", "size": 3}]}]
        async with run.http.get(f"{run.base}/api/dashboard/jobs/local/other/runs") as response:
            assert (await response.json())["items"] == []
        await run.feed(PhaseComplete(phase=Phase.PROFILING, issued=10, returned=10))
        async with run.http.get(f"{run.base}/api/progress") as response:
            assert (await response.json())["jobPhase"] == "processing"
        await run.feed(SystemStateChanged(state=SystemState.STOPPING))
        async with run.http.get(f"{run.base}/api/progress") as response:
            assert (await response.json())["jobPhase"] == "stopping"  # no summary yet
        summary = {"was_cancelled": False, "end_time": "2026-01-01T00:00:02+00:00"}
        (run.artifact_dir / "profile_export_aiperf.json").write_text(json.dumps(summary))
        async with run.http.get(f"{run.base}/api/dashboard/jobs/local/{name}/runs") as response:
            item = (await response.json())["items"][0]
        assert item["phase"] == "done" and item["completedAt"] == summary["end_time"]
        await run.feed(ServiceFailed(service_id="worker-1", service_type=ServiceType.WORKER, error="x"))
        async with run.http.get(f"{run.base}/api/progress") as response:
            assert (await response.json())["jobPhase"] == "failed"
