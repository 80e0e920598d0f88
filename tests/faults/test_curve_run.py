"""A full local run with CURVE on (`AIPERF_CURVE=1`) against the mock: every channel
authenticated, the run completes with balanced accounting, and no key material outlives it
or lands in the artifacts (issue 10, item 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e._harness import aiperf

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def test_a_local_run_with_curve_completes_balanced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPERF_CURVE", "1")
    with running_mock("--ttft-ms", "1", "--itl-ms", "1", "--output-tokens", "8") as server:
        run = aiperf("profile", "--model", "mock", "--url", server.url, "--streaming",
                     "--concurrency", "4", "--request-count", "60", artifacts=tmp_path / "a")
    assert run.code == 0, run.stderr
    ext = run.accounting()
    assert ext["accounting_balanced"], ext["accounting_problems"]
    assert run.metric("request_count") == 60
    keys_dir = json.loads((tmp_path / "a" / "run_config.json").read_text())["comms"]["curve_keys_dir"]
    assert keys_dir is not None and keys_dir.endswith("/curve")
    assert not Path(keys_dir).exists()  # generated into the private IPC folder, removed with it
    for path in (tmp_path / "a").rglob("*"):
        if path.is_file():
            assert b"secret-key" not in path.read_bytes(), path
