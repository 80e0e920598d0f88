"""Process faults of a local run: whatever happens to the `aiperf` process, its services stop."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from e2e._harness import aiperf_process, jsonl_count, kill, pids_of, wait_for

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

STOP_BOUND_S = 20.0
"""How long services may take to stop once the `aiperf` process is gone: SIGTERM (from the
kernel) is a graceful stop; returning in-flight credits and closing sockets takes a few seconds."""


def test_sigkill_of_the_cli_stops_every_service(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "20", "--itl-ms", "10", "--output-tokens", "64") as server:
        proc = aiperf_process("profile", "--model", "mock", "--url", server.url, "--streaming",
                              "--concurrency", "4", "--request-count", "100000", "--num-dataset-entries", "100",
                              "--workers-max", "2",
                              artifacts=artifacts)
        try:
            wait_for(lambda: jsonl_count(artifacts) >= 8, 90, "the first records")
            services = pids_of(f"aiperf.boot .*{artifacts}")
            assert len(services) >= 8, services  # every service of the run is up
            kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
            wait_for(lambda: not pids_of(f"aiperf.boot .*{artifacts}"), STOP_BOUND_S,
                     "every service to stop after the aiperf process was killed")
        finally:
            for pid in pids_of(f"aiperf.boot .*{artifacts}"):
                kill(pid)
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
