"""`--issuing per_pod` end to end: the real CLI, real services as processes, the real mock. The
timing-manager only coordinates the pods (`PodCoordinator` on the `pods` channel); the
worker-group-manager (locally: the one pod) issues its workers' credits on its pod-local
sockets. The runs count and export what the default (`central`) issuing does."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from e2e._harness import Run, aiperf, aiperf_process, jsonl_count, kill, pids_of, wait_for

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

CLOSED_LOOP = ("--concurrency", "8", "--request-count", "200", "--random-seed", "7")


def _log_events(run: Run, service: str) -> list[str]:
    """The `event` of each line in `logs/<service>.log` (the run logs at info)."""
    lines = (run.artifacts / "logs" / f"{service}.log").read_text().splitlines()
    return [json.loads(line).get("event", "") for line in lines if line.startswith("{")]


def _complete(run: Run, requests: int, warmup: int = 0) -> dict[str, object]:
    """The run succeeded with `requests` profiling requests, every record (the warmup's too, as
    with central issuing) exported and the books balanced; returns the profiling accounting."""
    assert run.code == 0, run.stderr[-3000:]
    assert run.metric("request_count") == requests
    assert jsonl_count(run.artifacts) == requests + warmup
    assert (run.artifacts / "profile_export_aiperf.csv").is_file()
    ext = run.accounting()
    assert ext["accounting_balanced"], ext["accounting_problems"]
    prof: dict[str, object] = ext["accounting"]["profiling"]
    assert prof["issued"] == prof["ok"] == requests and prof["lost"] == 0
    return prof


def test_closed_loop_per_pod_counts_what_central_does(tmp_path: Path) -> None:
    with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "8") as server:
        args = ("profile", "--model", "mock", "--url", server.url, "--streaming", "--ui", "none",
                "--log-level", "info", *CLOSED_LOOP)
        central = aiperf(*args, artifacts=tmp_path / "central")
        per_pod = aiperf(*args, "--issuing", "per_pod", artifacts=tmp_path / "per_pod")
    _complete(central, 200)
    _complete(per_pod, 200)
    assert per_pod.metric("output_sequence_length", "max") == central.metric("output_sequence_length", "max") == 8
    # who issued: the pod's engine, under the coordinator; centrally the timing-manager itself
    assert {"pods.configured", "pods.phase_started", "pods.phase_complete"} <= set(_log_events(per_pod, "timing-manager"))
    assert "timing.phase_started" not in _log_events(per_pod, "timing-manager")
    assert {"pods.registered", "timing.phase_complete"} <= set(_log_events(per_pod, "worker-group-manager-g0"))
    assert "timing.phase_started" in _log_events(central, "timing-manager")
    assert "pods.registered" not in _log_events(central, "worker-group-manager-g0")


def test_request_rate_with_warmup_per_pod(tmp_path: Path) -> None:
    with running_mock("--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "4") as server:
        run = aiperf("profile", "--model", "mock", "--url", server.url, "--streaming", "--ui", "none",
                     "--request-rate", "200", "--request-count", "150", "--warmup-request-count", "10",
                     "--random-seed", "42", "--issuing", "per_pod", artifacts=tmp_path / "a")
    _complete(run, 150, warmup=10)
    books = run.accounting()["accounting"]
    assert books["warmup"]["issued"] == 10
    # the schedule lag comes from the pod's histograms (sent ahead: mostly negative), not left 0
    assert books["profiling"]["schedule_lag_p50_ns"] != 0 or books["profiling"]["schedule_lag_p99_ns"] != 0


def test_ctrl_c_per_pod_writes_partial_results(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "20", "--itl-ms", "10", "--output-tokens", "64") as server:
        proc = aiperf_process("profile", "--model", "mock", "--url", server.url, "--streaming", "--ui", "none",
                              "--concurrency", "4", "--request-count", "100000", "--num-dataset-entries", "100",
                              "--issuing", "per_pod", artifacts=artifacts)
        wait_for(lambda: jsonl_count(artifacts) >= 8, 60, "the first records")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    summary = json.loads((artifacts / "profile_export_aiperf.json").read_text())
    assert summary["was_cancelled"] is True
    assert summary["aiperf_extensions"]["accounting_balanced"], summary["aiperf_extensions"]["accounting_problems"]
    prof = summary["aiperf_extensions"]["accounting"]["profiling"]
    assert prof["cancelled"] + prof["lost"] <= 4 and prof["issued"] < 100000


def test_a_killed_worker_per_pod_is_accounted_for(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "50", "--itl-ms", "10", "--output-tokens", "32") as server:
        proc = aiperf_process("profile", "--model", "mock", "--url", server.url, "--streaming", "--ui", "none",
                              "--concurrency", "8", "--request-count", "120", "--workers-max", "2",
                              "--issuing", "per_pod", artifacts=artifacts)
        wait_for(lambda: jsonl_count(artifacts) >= 10, 60, "the first records")
        victims = pids_of(f"aiperf.worker.main.*{artifacts}.*worker-g0-1")
        assert len(victims) == 1, victims
        kill(victims[0], signal.SIGKILL)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "worker-g0-1" in err
    accounting = json.loads((artifacts / "profile_export_aiperf.json").read_text())["aiperf_extensions"]
    assert accounting["accounting_balanced"], accounting["accounting_problems"]
    prof = accounting["accounting"]["profiling"]
    assert prof["ok"] + prof["failed"] + prof["cancelled"] + prof["lost"] == prof["issued"] <= 120
    assert prof["lost"] >= 1  # the dead worker's credits, written off by the pod's engine
