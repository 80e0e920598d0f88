"""User mistakes: one clear line and exit code 2; server failures: counted, never a crash."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from e2e._harness import aiperf

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
