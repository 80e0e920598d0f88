"""User mistakes: one clear line and exit code 2; server failures: counted, never a crash."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from e2e._harness import aiperf, env

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert errors, stderr
    return errors[0]


@pytest.mark.parametrize(("flags", "expected"), [
    (["--request-rate", "0"], "--request-rate"),
    (["--request-count", "-5"], "--request-count"),
    (["--concurrency", "0"], "--concurrency"),
    (["--input-file", "/no/such/file.jsonl"], "--input-file"),
])
def test_impossible_flags(tmp_path: Path, flags: list[str], expected: str) -> None:
    run = aiperf("profile", "--model", "m", "--url", "http://127.0.0.1:9", *flags, artifacts=tmp_path / "a")
    assert run.code == 2
    assert expected in one_error_line(run.stderr)


@pytest.mark.parametrize("flags", [["--no-such-flag", "1"], ["--concurrency", "0"]])
def test_a_flag_mistake_leaves_no_zygote_behind(tmp_path: Path, flags: list[str]) -> None:
    """`profile` starts its zygote before parsing its flags; after a mistake it is gone (killed
    and waited for, its temporary log removed) by the time the command has exited 2."""
    tmp, mark = tmp_path / "tmp", f"aiperf-test-{uuid.uuid4().hex}"
    tmp.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "aiperf.cli", "profile", "--model", "m", "--url", "http://127.0.0.1:9", *flags,
         "--artifact-dir", str(tmp_path / "a")],
        env={**env(), "TMPDIR": str(tmp), "AIPERF_TEST_MARK": mark}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp.iterdir()) == []  # the early zygote's log: removed when it was closed
    assert processes_marked(mark) == []


def processes_marked(mark: str) -> list[int]:
    """Live processes whose environment holds `AIPERF_TEST_MARK=mark`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"AIPERF_TEST_MARK={mark}".encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:  # gone, or not ours
                continue
    return found


def test_unreachable_url(tmp_path: Path) -> None:
    run = aiperf("profile", "--model", "m", "--url", f"http://127.0.0.1:{closed_port()}",
                 artifacts=tmp_path / "a")
    assert run.code == 2
    assert "cannot reach" in one_error_line(run.stderr)


def test_malformed_dataset_line_is_named(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"text": "hello"}\n{"text": "ok"}\nthis is not json\n')
    with running_mock() as server:
        run = aiperf("profile", "--model", "m", "--url", server.url, "--input-file", str(data),
                     "--custom-dataset-type", "single_turn", artifacts=tmp_path / "a")
    assert run.code == 2, run.stderr
    assert "data.jsonl:3" in one_error_line(run.stderr)


def test_wrong_path_gives_404_hint(tmp_path: Path) -> None:
    with running_mock() as server:
        run = aiperf("profile", "--model", "m", "--url", f"{server.url}/nope", "--request-count", "5",
                     artifacts=tmp_path / "a")
    assert run.code == 2, run.stderr
    assert "404" in one_error_line(run.stderr)


def test_an_open_file_limit_too_low_for_the_concurrency_is_one_line(tmp_path: Path) -> None:
    # a hard limit of 1024 cannot hold 5,000 connections in one worker: said before anything starts
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    with socket.socket() as listener:  # reachable: the preflight only connects
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "aiperf.cli", "profile", "--model", "m", "--url", url, "--concurrency", "5000",
             "--workers-max", "1", "--artifact-dir", str(tmp_path / "a")],
            env=env(), preexec_fn=limit, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result.stderr)
    assert "each worker process needs about" in line and "(hard limit 1024)" in line and "--workers-max" in line
