"""A service of a local run killed (SIGKILL) or stopped (SIGSTOP, then SIGCONT) while profiling:
the run ends within a stated bound with a verdict that names the service, never a traceback,
and leaves no process behind (issue 10, the fault suite's process cases; kills in the configure,
warmup and finalize phases are in test_kills_in_<phase>.py).

Each run is time-bound (`--benchmark-duration`), so a run degraded by a lost worker still ends.
A killed service fails the run (exit 1, its id in the error) or, for a worker, degrades it (exit
1, "lost" and the accounting of the credits it held); a stopped-then-continued one is only late:
locally a service's liveness is its process, so the run completes (exit 0, balanced).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from e2e._harness import aiperf_process, finish, jsonl_count, kill, pids_of, wait_for

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

VERDICT_BOUND_S = 60.0
"""From the kill to the `aiperf` process's exit: the rest of the 8 s run, the grace period, the
controller's shutdown of the others (10 s each at worst)."""
STOP_BOUND_S = 20.0
"""From the `aiperf` process's exit until no service process of the run is left."""
PAUSE_S = 3.0
"""How long a stopped service stays stopped: well under the 10 s heartbeat timeout."""

KILLED = ["timing-manager", "dataset-manager", "records-manager", "api", "event-bus-proxy",
          "worker-group-manager-g0", "worker-g0-0", "record-processor-g0-0"]


def _start(server_url: str, artifacts: Path):  # type: ignore[no-untyped-def]
    return aiperf_process("profile", "--model", "mock", "--url", server_url, "--streaming",
                          "--concurrency", "4", "--benchmark-duration", "8", "--workers-max", "2",
                          "--record-processors", "1", artifacts=artifacts)


def _service_pid(artifacts: Path, service_id: str) -> int:
    pids = pids_of(f"aiperf.boot .*{artifacts}.* --service-id {service_id}( |$)")
    assert len(pids) == 1, (service_id, pids)
    return pids[0]


@pytest.mark.parametrize("service_id", KILLED)
def test_a_killed_service_ends_the_run_with_its_name(tmp_path: Path, service_id: str) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "5", "--itl-ms", "2", "--output-tokens", "16") as server:
        proc = _start(server.url, artifacts)
        try:
            wait_for(lambda: jsonl_count(artifacts) >= 8, 90, "the first records (profiling)")
            kill(_service_pid(artifacts, service_id), signal.SIGKILL)
            killed_at = time.monotonic()
            run = finish(proc, artifacts, timeout=VERDICT_BOUND_S)
            took = time.monotonic() - killed_at
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
        wait_for(lambda: not pids_of(f"aiperf.boot .*{artifacts}"), STOP_BOUND_S, "every service to stop")
    print(f"{service_id}: exit {run.code} {took:.1f} s after the kill; "
          f"{[line for line in run.stderr.splitlines() if not line.startswith('{')][-3:]}")
    assert "Traceback" not in run.stderr
    assert run.code == 1, run.stderr[-2000:]
    assert service_id in run.stderr, run.stderr[-2000:]


@pytest.mark.parametrize("service_id", ["worker-g0-0", "record-processor-g0-0"])
def test_a_stopped_then_continued_service_only_delays_the_run(tmp_path: Path, service_id: str) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "5", "--itl-ms", "2", "--output-tokens", "16") as server:
        proc = _start(server.url, artifacts)
        try:
            wait_for(lambda: jsonl_count(artifacts) >= 8, 90, "the first records (profiling)")
            pid = _service_pid(artifacts, service_id)
            kill(pid, signal.SIGSTOP)
            try:
                time.sleep(PAUSE_S)  # the fault itself: a process frozen this long (no assertion on time)
            finally:
                kill(pid, signal.SIGCONT)
            run = finish(proc, artifacts, timeout=VERDICT_BOUND_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
        wait_for(lambda: not pids_of(f"aiperf.boot .*{artifacts}"), STOP_BOUND_S, "every service to stop")
    assert "Traceback" not in run.stderr
    assert run.code == 0, run.stderr[-2000:]
    ext = run.accounting()
    assert ext["accounting_balanced"], ext["accounting_problems"]
