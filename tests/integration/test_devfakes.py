"""`aiperf dev-fakes --for worker`: the real worker process, alone, against fakes of its peers."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def read_until(proc: subprocess.Popen[str], *needles: str, timeout: float) -> list[str]:
    """Lines of `proc`'s stdout up to the first containing every needle (deadline: `timeout`)."""
    assert proc.stdout is not None
    deadline, lines = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if all(needle in line for needle in needles):
            return lines
    raise AssertionError(f"{needles!r} not seen; got: {''.join(lines)}")


def test_worker_runs_alone_against_the_fakes(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with running_mock("--output-tokens", "8") as server:
        fakes = subprocess.Popen(
            [sys.executable, "-m", "aiperf.cli", "dev-fakes", "--for", "worker", "--dir", str(tmp_path),
             "--url", server.url, "--credits", "3"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            lines = read_until(fakes, "aiperf service worker", timeout=60)
            command = shlex.split(lines[-1].strip().removeprefix("(or: ").removesuffix(")"))
            assert command[:3] == ["aiperf", "service", "worker"]
            worker = subprocess.Popen([sys.executable, "-m", "aiperf.cli", *command[1:]], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            seen = read_until(fakes, "fake_tm.credit_returned", '"num": 2', timeout=60)  # the third
            assert sum("fake_tm.credit_returned" in ln for ln in seen) == 3
            assert sum("fake_rp.record" in ln and '"status": 200' in ln for ln in seen) == 3
            fakes.send_signal(signal.SIGINT)  # the fakes send Shutdown to the worker
            assert worker.wait(timeout=30) == 0
            assert fakes.wait(timeout=30) == 0
        finally:
            for proc in (fakes,):
                if proc.poll() is None:
                    proc.kill()
            fakes.communicate()
