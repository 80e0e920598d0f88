"""`--wait-for-model-*` (issue 25, AIPerf 0.13.0's readiness probe) against the mock: a run started
before its server waits for it and then runs in full (the inference probe is one more chat
request the server receives); `models` mode polls `/v1/models` and sends no chat request; a
server that never comes fails the run with one line once the timeout has passed."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest
from e2e._harness import aiperf, aiperf_process, wait_for

from aiperf.mock_server.testing import MockProcess, running_mock

pytestmark = pytest.mark.slow

MOCK = ("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "4")
REQUESTS = 4
CHAT = "/v1/chat/completions"
RUN = ("profile", "--model", "mock", "--streaming", "--concurrency", "2", "--request-count", str(REQUESTS),
       "--workers-max", "1", "--record-processors", "1", "--isl", "16")


def _served(url: str) -> dict[str, int]:
    """The mock's answered requests so far, by path (any status)."""
    with urllib.request.urlopen(url + "/stats", timeout=30) as answer:
        by_endpoint = json.loads(answer.read())["requests_by_endpoint"]
    return {path: sum(int(n) for n in statuses.values()) for path, statuses in by_endpoint.items()}


def _stderr_lines(proc: subprocess.Popen[str]) -> tuple[list[str], threading.Thread]:
    """The lines `proc` writes on stderr, collected by a thread as they come (the list grows),
    and that thread (it ends at the pipe's end)."""
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, reader


def test_a_run_waits_for_a_server_that_comes_late(tmp_path: Path) -> None:
    late = MockProcess(*MOCK)  # its port is held (nothing answers) until it starts
    artifacts = tmp_path / "a"
    proc = aiperf_process(*RUN, "--url", late.url, "--wait-for-model-timeout", "120", "--wait-for-model-interval",
                          "0.2", artifacts=artifacts)
    stderr, reader = _stderr_lines(proc)
    try:
        wait_for(lambda: any("readiness.not_ready" in line for line in stderr) or proc.poll() is not None, 120,
                 "the first failed readiness probe")
        assert proc.poll() is None, "".join(stderr)
        late.start()
        assert proc.wait(timeout=240) == 0, "".join(stderr)[-2000:]
        summary = json.loads((artifacts / "profile_export_aiperf.json").read_text())
        assert summary["aiperf_extensions"]["accounting"]["profiling"]["ok"] == REQUESTS
        assert _served(late.url).get(CHAT) == REQUESTS + 1  # the one-token probe, then the benchmark
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        reader.join(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        if late.running:
            late.stop()


def test_models_mode_polls_the_model_list(tmp_path: Path) -> None:
    with running_mock(*MOCK, "--model", "mock") as mock:  # /v1/models lists the model the run names
        run = aiperf(*RUN, "--url", mock.url + "/v1", "--wait-for-model-timeout", "30", "--wait-for-model-mode",
                     "models", "--wait-for-model-interval", "0.2", artifacts=tmp_path / "a")
        assert run.code == 0, run.stderr[-2000:]
        served = _served(mock.url)
    assert served.get(CHAT) == REQUESTS and served.get("/v1/models", 0) >= 1


def test_a_server_that_never_comes_fails_the_run_in_one_line(tmp_path: Path) -> None:
    never = MockProcess(*MOCK)  # never started
    run = aiperf(*RUN, "--url", never.url, "--wait-for-model-timeout", "1", "--wait-for-model-interval", "0.2",
                 artifacts=tmp_path / "a")
    assert run.code != 0
    assert "--wait-for-model-timeout" in run.stderr and "not ready after 1s" in run.stderr, run.stderr[-2000:]
