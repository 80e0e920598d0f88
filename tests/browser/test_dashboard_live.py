"""The dashboard of a live local run, in headless Chromium: the real CLI runs the mock server's
benchmark, the api service serves /dashboard, and the job page follows the run over the
progress WebSocket until its phase cell reads ``done``, without a reload."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser.conftest import Browser, child_env, free_port, wait_http

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def test_a_finishing_run_updates_the_job_page_live(browser: Browser, tmp_path: Path) -> None:
    artifacts = tmp_path / "live-run"
    port = free_port()
    with running_mock("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8") as mock:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aiperf.cli", "profile", "--model", "mock", "--url", mock.url,
             "--endpoint-type", "chat", "--streaming", "--request-rate", "25", "--request-count", "50",
             "--artifact-dir", str(artifacts)],
            env={**child_env(), "AIPERF_API_PORT": str(port)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_http(base + "/health", 60)
            browser.console_errors()
            browser.open(f"{base}/dashboard/job?ns=local&name={artifacts.name}")
            first = browser.attr("#phase", "data-phase")
            assert first != "done", "the page loaded after the run ended: nothing was live"
            browser.wait(lambda d: d.find_element("id", "live").get_attribute("data-live") == "websocket", 20,
                         "the progress socket")
            browser.wait(lambda d: d.find_element("css selector", '#progress tr[data-phase="profiling"]'), 30,
                         "profiling progress")
            browser.screenshot("dashboard-live-running")
            browser.wait(lambda d: d.find_element("id", "phase").get_attribute("data-phase") == "done", 60,
                         "the phase cell to read done")
            completed = browser.text('#progress tr[data-phase="profiling"] td.completed')
            browser.screenshot("dashboard-live-done")
            stdout, stderr = proc.communicate(timeout=60 * float(os.environ.get("AIPERF_TEST_TIMEOUT_SCALE", "1")))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert first in {"starting", "warmup", "profiling"}, first
    assert 0 < int(completed) <= 50  # progress is periodic: the last one may precede the end
