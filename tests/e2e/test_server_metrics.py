"""Server metrics (issue 11, item 4): a real `aiperf profile` against the mock scrapes its
vLLM-style /metrics around the phase and exports server_metrics_export.json/.csv with exact
counter deltas and bucket-derived histogram percentiles that match the mock's configuration."""

from __future__ import annotations

import csv
import io
import json
import urllib.request
from pathlib import Path

import pytest
from e2e._harness import aiperf

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

REQUESTS, TOKENS, TTFT_MS = 24, 8, 50


def test_a_run_exports_exact_server_counter_deltas_and_ttft_buckets(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", str(TTFT_MS), "--itl-ms", "1", "--output-tokens", str(TOKENS)) as server:
        for _ in range(3):  # traffic before the run must not count: the export is a delta over the phase
            body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
            request = urllib.request.Request(server.url + "/v1/chat/completions", data=body,
                                             headers={"content-type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert answer.status == 200
        run = aiperf("profile", "--model", "mock", "--url", server.url, "--streaming", "--concurrency", "4",
                     "--request-count", str(REQUESTS), "--workers-max", "2", "--record-processors", "1",
                     "--server-metrics", "http://127.0.0.1:9/metrics", artifacts=artifacts)
    assert run.code == 0, run.stderr[-2000:]
    doc = json.loads((artifacts / "server_metrics_export.json").read_text())
    assert list(doc) == ["schema_version", "aiperf_version", "benchmark_id", "summary", "metrics",
                         "endpoint_errors"]
    own = server.url + "/metrics"
    assert doc["summary"]["endpoints_configured"] == [own, "http://127.0.0.1:9/metrics"]
    assert doc["summary"]["endpoints_successful"] == [own]
    assert list(doc["endpoint_errors"]) == ["http://127.0.0.1:9/metrics"]  # recorded, not fatal

    def stats(name: str, **labels: str) -> dict[str, float]:
        metric = doc["metrics"][name]
        (series,) = (s for s in metric["series"] if s["endpoint_url"] == own
                     and labels.items() <= s.get("labels", {}).items())
        return series["stats"]  # type: ignore[no-any-return]

    assert doc["metrics"]["vllm:generation_tokens"]["type"] == "counter"
    assert doc["metrics"]["vllm:generation_tokens"]["unit"] == "tokens"
    assert stats("vllm:generation_tokens")["total"] == REQUESTS * TOKENS
    assert stats("vllm:request_success", finished_reason="stop")["total"] == REQUESTS
    assert stats("vllm:generation_tokens")["rate"] > 0
    ttft = stats("vllm:time_to_first_token_seconds")
    assert ttft["count"] == REQUESTS
    assert ttft["sum"] == pytest.approx(REQUESTS * TTFT_MS / 1000)
    # Every observation is 0.05 s: in vLLM's (0.04, 0.06] bucket, so interpolation gives the
    # configured TTFT exactly at the median and stays within that bucket elsewhere.
    assert ttft["p50_estimate"] == pytest.approx(TTFT_MS / 1000)
    assert 0.04 <= ttft["p90_estimate"] <= 0.06 and 0.04 <= ttft["p99_estimate"] <= 0.06
    e2e = stats("vllm:e2e_request_latency_seconds")
    assert e2e["count"] == REQUESTS and e2e["p50_estimate"] <= 0.3  # first bucket: 57 ms + scheduling
    running = stats("vllm:num_requests_running")
    assert doc["metrics"]["vllm:num_requests_running"]["type"] == "gauge"
    assert 0 <= running["min"] <= running["max"] <= 4
    rows = list(csv.reader(io.StringIO((artifacts / "server_metrics_export.csv").read_text())))
    assert rows[0][:4] == ["Endpoint", "Type", "Metric", "Unit"] and rows[0][4] == "total"
    generation = [r for r in rows if len(r) > 4 and r[2].startswith('vllm:generation_tokens{model_name=')]
    assert generation and float(generation[0][4]) == REQUESTS * TOKENS
    assert sum("server metrics" in line or "scrape_failed" in line for line in run.stderr.splitlines()) <= 1
