"""Several endpoint URLs (AIPerf's `--url A B`, `endpoint.urls` with `urlStrategy: round_robin`):
a real `aiperf profile` against two mock servers sends each conversation to the next server in
turn, both servers' requests are in the results, and both servers' /metrics are scraped."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from e2e._harness import aiperf

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def _requests(url: str) -> int:
    with urllib.request.urlopen(url + "/stats", timeout=30) as answer:
        return int(json.loads(answer.read())["requests"])


def test_conversations_go_to_the_servers_in_turn(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4") as one, \
            running_mock("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4") as two:
        run = aiperf("profile", "--model", "mock", "--url", one.url, two.url, "--streaming", "--concurrency", "3",
                     "--request-count", "30", "--workers-max", "2", "--record-processors", "1",
                     artifacts=artifacts)
        assert run.code == 0, run.stderr[-2000:]
        assert (_requests(one.url), _requests(two.url)) == (15, 15)
    assert run.accounting()["accounting"]["profiling"]["ok"] == 30
    metrics = json.loads((artifacts / "server_metrics_export.json").read_text())
    assert metrics["summary"]["endpoints_successful"] == [one.url + "/metrics", two.url + "/metrics"]
