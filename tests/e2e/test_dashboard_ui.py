"""`--ui dashboard` (issue 11, item 6) in a real terminal: `aiperf profile` runs in a detached tmux
pane against the mock server, and the pane is read while the run goes (the live dashboard, in
the profiling phase) and after it (the last frame, then the results table). Outside a terminal
the same flag prints the last frame once, without escape codes, and `--auto-plot` plots the
exports (issue 11, item 3)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e._harness import aiperf

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

MOCK = ("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "32")
REQUESTS = 60


def _profile(url: str, artifacts: Path) -> list[str]:
    # 2 in flight, ~0.2 s each: the profiling phase lasts ~6 s, long enough to be seen live.
    return ["profile", "--model", "mock", "--url", url, "--streaming", "--concurrency", "2",
            "--request-count", str(REQUESTS), "--warmup-request-count", "2", "--workers-max", "2",
            "--ui", "dashboard", "--artifact-dir", str(artifacts)]


class Pane:
    """One detached tmux session on a private server socket (never the user's tmux)."""

    def __init__(self, socket: Path, command: str) -> None:
        self._base = ["tmux", "-S", str(socket), "-f", "/dev/null"]
        subprocess.run([*self._base, "new-session", "-d", "-s", "aiperf", "-x", "160", "-y", "50", command],
                       check=True, timeout=10)

    def text(self, history: bool = False) -> str:
        extra = ["-J", "-S", "-300"] if history else []  # -J: wrapped lines joined
        return subprocess.run([*self._base, "capture-pane", "-p", "-t", "aiperf", *extra],
                              capture_output=True, text=True, timeout=10).stdout

    def wait_for(self, *needles: str, timeout: float) -> str:
        """The pane's text once it shows every needle; raises with the last screen after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.text()
            if all(n in screen for n in needles):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the pane never showed {needles} in {timeout} s; last screen:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run([*self._base, "kill-server"], capture_output=True, timeout=10)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (a real terminal)")
def test_the_dashboard_shows_the_run_live_in_a_terminal_then_the_results(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock(*MOCK) as server:
        script = tmp_path / "run.sh"
        argv = [sys.executable, "-m", "aiperf.cli", *_profile(server.url, artifacts)]
        # The pane's own size, not one inherited from the environment of this process.
        script.write_text(f"unset COLUMNS LINES\nexport PYTHONPATH={shlex.quote(os.pathsep.join(sys.path))}\n"
                          f"{shlex.join(argv)}\necho \"EXIT=$?\"\nsleep 60\n")
        pane = Pane(tmp_path / "tmux.sock", f"sh {shlex.quote(str(script))}")
        try:
            # Deadlines, not durations: ~10 s to the profiling phase on a quiet 2-core machine.
            live = pane.wait_for("state profiling", "Phases", "Workers", timeout=90)
            assert "aiperf profile mock @ " + server.url in live
            assert "worker-g0-0" in live and "heartbeat" in live
            assert "TTFT" in live and "ITL" in live
            assert "Log" in live
            pane.wait_for("EXIT=", timeout=90)
            final = pane.text(history=True)
        finally:
            pane.kill()
    assert "EXIT=0" in final, final
    assert "state done" in final
    assert f"{REQUESTS}/{REQUESTS}" in final  # the profiling row of the last frame
    assert "Time to First Token (ms)" in final  # the results table, printed after the dashboard
    assert f"profiling: issued {REQUESTS} = ok {REQUESTS} + failed 0" in final, final[-3000:]


def test_outside_a_terminal_the_dashboard_prints_its_last_frame_once_and_auto_plot_plots(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock(*MOCK) as server:
        args = _profile(server.url, artifacts)
        run = aiperf(*args[:-2], "--auto-plot", artifacts=artifacts)
    assert run.code == 0, run.stderr[-2000:]
    assert "\x1b[" not in run.stdout
    assert run.stdout.count("Phases") == 1 and "state done" in run.stdout
    assert "Time to First Token (ms)" in run.stdout
    assert f"plots: {artifacts / 'plots'}/ (ttft_cdf.png" in run.stdout
    pngs = sorted(p.name for p in (artifacts / "plots").glob("*.png"))
    assert pngs == ["itl_cdf.png", "request_latency_cdf.png", "timeline.png", "ttft_cdf.png"]
    assert (artifacts / "plots" / "report.html").stat().st_size > 10_000
    assert "warning" not in run.stderr
