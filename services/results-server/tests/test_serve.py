"""The results server as a process: `python -m aiperf.results_server.main` under real granian on
127.0.0.1, raw HTTP requests whose paths no client would normalise, a clean stop on SIGTERM,
and one-line usage errors."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from aiperf.results.index import ResultsIndex
from aiperf.results_server.main import main
from aiperf.testing.stored_runs import complete

NS, JOB, EPOCH = "bench", "run", "1700000000111111"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def raw_get(port: int, path: str) -> tuple[int, bytes]:
    """One HTTP/1.1 GET with `path` sent byte for byte."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    anyio.run(lambda: complete(ResultsIndex(tmp_path, keep=10), NS, JOB, EPOCH))
    (tmp_path / "secret.txt").write_text("top secret")
    # --port 0: the server picks a free port (and holds it until it listens) and prints its URL.
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.results_server.main", "--base", str(tmp_path), "--port",
                             "0", "--layout", "volume"], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline().decode()  # printed once it accepts connections
        url = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert url is not None, (line, proc.stderr.read() if proc.poll() is not None else b"")
        yield int(url.group(1)), proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.timeout(90)
def test_granian_serves_the_routes_and_refuses_raw_traversals(server: tuple[int, subprocess.Popen[bytes]]) -> None:
    port, proc = server
    assert raw_get(port, "/healthz") == (200, b'{"status":"ok"}')
    status, body = raw_get(port, f"/api/v1/results/{NS}/{JOB}/runs/{EPOCH}/inputs.json")
    assert (status, body) == (200, b'{"data": []}\n')
    assert raw_get(port, f"/api/v1/results/{NS}/{JOB}")[0] == 409
    assert raw_get(port, f"/api/v1/results/{NS}/{JOB}/runs/latest")[0] == 422
    for path in (f"/api/v1/results/{NS}/{JOB}/runs/{EPOCH}/../../../secret.txt",
                 f"/api/v1/results/{NS}/{JOB}/runs/{EPOCH}/..%2f..%2f..%2fsecret.txt",
                 f"/api/v1/results/{NS}/{JOB}/runs/{EPOCH}/%2e%2e/%2e%2e/%2e%2e/secret.txt",
                 f"/api/v1/results/{NS}/{JOB}/runs/{EPOCH}//etc/passwd",
                 f"/api/v1/results/{NS}/{JOB}/runs/{EPOCH}/secret.txt%00",
                 "/api/v1/results/../../secret.txt", "/../../secret.txt"):
        status, body = raw_get(port, path)
        assert status in (400, 404, 409, 422) and b"top secret" not in body, (path, status)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_a_missing_directory_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--base", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a directory" in err and err.count("\n") == 1


def test_an_invalid_keep_or_port_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["--base", str(tmp_path), "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err
    (tmp_path / ".aiperf_index.sqlite").write_bytes(b"")
    monkeypatch.setenv("AIPERF_RESULTS_KEEP", "none")
    assert main(["--base", str(tmp_path)]) == 2
    assert "AIPERF_RESULTS_KEEP" in capsys.readouterr().err
