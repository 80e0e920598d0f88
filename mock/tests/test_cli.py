"""Command line: usage errors are one line and exit 2; SIGTERM stops every process with exit 0."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import psutil
import pytest

from aiperf.mock_server.main import build_parser, main, parse_config
from aiperf.mock_server.testing import MockProcess, child_env


@pytest.mark.parametrize("argv", [
    ["--nope"],
    ["--error-rate", "1.5"],
    ["--port", "0"],
    ["--ttft-ms", "-1"],
    ["--workers", "0"],
    ["--itl-ms", "fast"],
    ["--output-tokens", "-3"],
])
def test_bad_flag_is_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("aiperf mock-server: error: ")


def test_port_in_use_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["--port", str(taken.getsockname()[1])]) == 2
    assert "already in use" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--ttft-ms" in capsys.readouterr().out


def test_defaults() -> None:
    config = parse_config([])
    assert (config.host, config.port, config.workers) == ("127.0.0.1", 8000, 1)
    assert config.ttft_ms == 0 and config.itl_ms == 0
    assert config.output_tokens is None and config.error_rate == 0 and config.jitter_ms == 0
    assert build_parser().prog == "aiperf mock-server"


def test_bad_flag_in_a_real_process() -> None:
    done = subprocess.run([sys.executable, "-m", "aiperf.mock_server.main", "--error-rate", "2"],
                          env=child_env(), capture_output=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.decode().strip().splitlines()) == 1, done.stderr
    assert b"--error-rate" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_all_processes_with_exit_0(sig: int, start_mock: Callable[..., MockProcess]) -> None:
    server = start_mock("--workers", "2")
    assert server.proc is not None
    workers = psutil.Process(server.proc.pid).children(recursive=True)
    assert len(workers) >= 2
    assert server.stop(sig) == 0, server.stderr
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
