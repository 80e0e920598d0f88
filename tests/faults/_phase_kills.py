"""Every service of a local run killed (SIGKILL) in the configure, warmup and finalize phases
(issue 10, the fault suite; the profiling phase and SIGSTOP/SIGCONT are in
test_service_kills.py; one test file per phase, test_kills_in_<phase>.py, so each fits the
per-file timeout): the run exits 1 naming the killed service (a worker killed in warmup
degrades the run: exit 1, "lost"), never a traceback, within `VERDICT_BOUND_S` of the kill,
and no process of the run is left `STOP_BOUND_S` after it exits. When a summary was written,
its accounting is balanced or its problems are named.

The phase is found from the controller's `system.state` log lines (`--log-level info`, on the
CLI's stderr) and the timing-manager's log, never by sleeping. Configure and finalize would
be over in well under a second, so they are held open: the records-manager, whose answer both
need (its `ProfileConfigure`, its `Finalize`), is stopped (SIGSTOP) before it is asked (for
configure: while the dataset is built, see `CONFIGURE_ENTRIES`) and continued (SIGCONT) once
the target is killed; it stays stopped for milliseconds, far under any command timeout. Warmup is held open by its duration (8 s in a config file); the other
phases run without a warmup.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from e2e._harness import env, jsonl_count, pids_of, wait_for

from aiperf.mock_server.testing import running_mock

VERDICT_BOUND_S = 60.0
"""From the kill to the `aiperf` process's exit: the rest of the run (8 s warmup, 3 s
profiling, grace) and the controller's shutdown of the others (10 s each at worst)."""
STOP_BOUND_S = 20.0
"""From the `aiperf` process's exit until no service process of the run is left."""
PHASE_BOUND_S = 90.0
"""From the start of the command to the phase the kill waits for (start-up on a busy machine)."""
HOLDER = "records-manager"
CONFIGURE_ENTRIES = 8000
"""Conversations of the configure runs' dataset. Building them (~1.7 s on the 2-core CI host)
keeps configure open from `system.all_registered` (every service's RUNNING sent) while the test
stops the holder; the default 100 (~40 ms) did not, and configure often ended before the kill."""

SERVICES = ["timing-manager", "dataset-manager", "records-manager", "api", "event-bus-proxy",
            "worker-group-manager-g0", "worker-g0-0", "record-processor-g0-0"]
PROFILING = {"type": "concurrency", "concurrency": 4, "duration": 3, "gracePeriod": 2}
WARMUP = {"type": "concurrency", "concurrency": 4, "duration": 8, "gracePeriod": 2}


class WatchedRun:
    """`aiperf profile` as a process whose stderr lines are collected as they come (a thread
    per pipe), so a test can wait on a log line while the run goes on."""

    def __init__(self, server_url: str, artifacts: Path, config: Path) -> None:
        self.artifacts = artifacts
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiperf.cli", "profile", "--config", str(config), "--url", server_url,
             "--streaming", "--workers-max", "2", "--record-processors", "1", "--log-level", "info",
             "--artifact-dir", str(artifacts)],
            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(pipe, lines), daemon=True)
                         for pipe, lines in ((self.proc.stderr, self.stderr), (self.proc.stdout, self.stdout))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(pipe, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in pipe:
            lines.append(line)

    def logged(self, event: str, **fields: str) -> bool:
        """True once the CLI (the controller) logged `event` with `fields`."""
        return _logged(list(self.stderr), event, **fields)

    def pid_of(self, service_id: str) -> int:
        pids = pids_of(f"aiperf.boot .*{self.artifacts}.* --service-id {service_id}( |$)")
        assert len(pids) == 1, (service_id, pids)
        return pids[0]

    def finish(self, timeout: float) -> tuple[int, str]:
        """The exit code and the whole stderr, once the process ended (within `timeout`)."""
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(10)
        return code, "".join(self.stderr)

    def close(self) -> None:
        """Kill the process if it still runs; close its pipes once their readers are done."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for reader in self._readers:
            reader.join(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # the holder was the target, or the run already took it down
        pass


def _logged(lines: list[str], event: str, **fields: str) -> bool:
    """True when one of the structlog JSON `lines` is `event` with `fields`."""
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut short while it is being written
            continue
        if entry.get("event") == event and all(entry.get(k) == v for k, v in fields.items()):
            return True
    return False


def _phase_started(artifacts: Path, phase: str) -> bool:
    """True once the timing-manager logged the start of `phase`."""
    try:
        lines = (artifacts / "logs" / "timing-manager.log").read_text().splitlines()
    except OSError:
        return False
    return _logged(lines, "timing.phase_started", phase=phase)


def _inject(run: WatchedRun, phase: str, target: str) -> None:
    """Kill `target` while the run is in `phase` (see the module docstring for how it is held)."""
    if phase == "configure":
        wait_for(lambda: run.logged("system.all_registered"), PHASE_BOUND_S, "every service running")
        holder = run.pid_of(HOLDER)
        _signal(holder, signal.SIGSTOP)
        try:
            wait_for(lambda: run.logged("system.state", state="configuring"), PHASE_BOUND_S, "configuring")
            _signal(run.pid_of(target), signal.SIGKILL)
            # Checked while the holder is still stopped: once continued, configure may end at
            # once (the target may have answered its part before the kill), before its verdict.
            assert not run.logged("system.state", state="ready"), "configure ended before the kill"
        finally:
            _signal(holder, signal.SIGCONT)
    elif phase == "warmup":
        wait_for(lambda: _phase_started(run.artifacts, "warmup"), PHASE_BOUND_S, "the warmup phase")
        wait_for(lambda: jsonl_count(run.artifacts) >= 1, PHASE_BOUND_S, "the first warmup record")
        _signal(run.pid_of(target), signal.SIGKILL)
        assert not _phase_started(run.artifacts, "profiling"), "warmup ended before the kill"
    else:
        wait_for(lambda: _phase_started(run.artifacts, "profiling"), PHASE_BOUND_S, "the profiling phase")
        holder = run.pid_of(HOLDER)
        _signal(holder, signal.SIGSTOP)
        try:
            wait_for(lambda: run.logged("system.state", state="exporting"), PHASE_BOUND_S, "exporting (finalize)")
            _signal(run.pid_of(target), signal.SIGKILL)
        finally:
            _signal(holder, signal.SIGCONT)


def check_kill_in_phase(tmp_path: Path, phase: str, target: str) -> None:
    """The whole case: a run whose `target` is killed in `phase`, and what must follow."""
    artifacts, config = tmp_path / "a", tmp_path / "config.json"
    body = {"model": "mock", "profiling": PROFILING, **({"warmup": WARMUP} if phase == "warmup" else {}),
            **({"datasets": [{"type": "synthetic", "entries": CONFIGURE_ENTRIES}]} if phase == "configure" else {})}
    config.write_text(json.dumps({"schemaVersion": "2.0", "benchmark": body}))
    with running_mock("--ttft-ms", "5", "--itl-ms", "2", "--output-tokens", "16") as server:
        run = WatchedRun(server.url, artifacts, config)
        try:
            _inject(run, phase, target)
            killed_at = time.monotonic()
            code, stderr = run.finish(timeout=VERDICT_BOUND_S)
            took = time.monotonic() - killed_at
        finally:
            run.close()
        wait_for(lambda: not pids_of(f"aiperf.boot .*{artifacts}"), STOP_BOUND_S, "every service to stop")
    said = [line.rstrip() for line in stderr.splitlines() if line.strip() and not line.startswith("{")]
    print(f"{phase}/{target}: exit {code} {took:.1f} s after the kill; {said[-3:]}")
    assert "Traceback" not in stderr
    assert code == 1, stderr[-2000:]
    assert any(target in line for line in said), said
    summary = artifacts / "profile_export_aiperf.json"
    if summary.exists():
        ext = json.loads(summary.read_text())["aiperf_extensions"]
        assert ext["accounting_balanced"] or ext["accounting_problems"], ext
