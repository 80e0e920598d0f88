"""Runs the real `aiperf` CLI as a process against a real mock server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass
class Run:
    """One finished `aiperf profile` process and what it wrote."""

    code: int
    stdout: str
    stderr: str
    artifacts: Path

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.artifacts / "profile_export_aiperf.json").read_text())
        return data

    def records(self) -> list[dict[str, Any]]:
        lines = (self.artifacts / "profile_export.jsonl").read_bytes().splitlines()
        return [orjson.loads(line) for line in lines if line.strip()]

    def metric(self, tag: str, stat: str = "avg") -> float:
        value: float = self.summary()[tag][stat]
        return value

    def accounting(self) -> dict[str, Any]:
        ext: dict[str, Any] = self.summary()["aiperf_extensions"]
        return ext


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def aiperf(*args: str, artifacts: Path, timeout: float = 240) -> Run:
    """`python -m aiperf.cli profile ARGS --artifact-dir artifacts`, waited for."""
    result = subprocess.run([sys.executable, "-m", "aiperf.cli", *args, "--artifact-dir", str(artifacts)],
                            env=env(), capture_output=True, text=True, timeout=timeout)
    return Run(result.returncode, result.stdout, result.stderr, artifacts)


def aiperf_process(*args: str, artifacts: Path) -> subprocess.Popen[str]:
    """The same, started and not waited for (for signal tests and runs watched while they go)."""
    return subprocess.Popen([sys.executable, "-m", "aiperf.cli", *args, "--artifact-dir", str(artifacts)],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], artifacts: Path, timeout: float = 240) -> Run:
    """Wait for an `aiperf_process` and return its `Run`."""
    stdout, stderr = proc.communicate(timeout=timeout)
    return Run(proc.returncode, stdout, stderr, artifacts)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll `predicate` until true; raise naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def jsonl_count(artifacts: Path) -> int:
    path = artifacts / "profile_export.jsonl"
    try:
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    except OSError:
        return 0


def pids_of(pattern: str) -> list[int]:
    """Pids of the other processes whose command line matches the regular expression `pattern`
    (what `pgrep -f` does, read from /proc: a bare Debian has no procps)."""
    found, me = [], str(os.getpid())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == me:
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # exited meanwhile
            continue
        if re.search(pattern, cmdline.replace(b"\0", b" ").decode(errors="replace")):
            found.append(int(proc.name))
    return found


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    os.kill(pid, sig)
