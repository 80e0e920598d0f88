"""A broken server (the mock's `--fault`): every request still ends in bounded time with one
record per credit, its error counted under its own type, the client's memory bounded, and the
run exits 0 with balanced accounting (issue 10, item 6 and the suite's server faults).

Bounds in force: `AIPERF_HTTP_READ_IDLE_TIMEOUT` 1.5 s, `AIPERF_HTTP_MAX_RESPONSE_BYTES`
32 MB, `--request-timeout-seconds` 4.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e._harness import env

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

REQUESTS = 4
RUN_BOUND_S = 90.0
"""Start-up (a few seconds, more on a busy machine) plus two rounds of 4 s request timeouts."""
PEAK_RSS_BOUND_MB = 600
"""The largest process of the run (the CLI or one of its services; the mock not counted)."""
_PEAK_RSS = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
             "print(f'peak_rss_kb={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr); "
             "sys.exit(code)")
"""Runs its arguments and reports the peak RSS of the largest process below it, once all ended."""
BOUNDS = {"AIPERF_HTTP_READ_IDLE_TIMEOUT": "1.5", "AIPERF_HTTP_MAX_RESPONSE_BYTES": str(32_000_000)}

CASES = {
    # fault: the error type each request must end with (None: the response is read, no error;
    # invalid UTF-8 is decoded with replacement characters, as browsers and OpenAI clients do)
    "reset": "ClientPayloadError",
    "hang-headers": "ReadIdleTimeout",
    "hang-stream": "ReadIdleTimeout",
    "trickle": "RequestTimeout",
    "endless": "ResponseTooLarge",
    "malformed-sse": "InvalidResponse",
    "invalid-utf8": None,
    "huge-event": None,
    "huge-word": None,  # one 8 MiB word: counted in pieces, in bounded time (aiperf.tokenizer.bounded)
    "5xx-storm": "Internal Server Error",  # every request answered 500 (the mock's --error-rate 1)
}
MOCK_ARGS = {"5xx-storm": ("--error-rate", "1.0")}
"""Cases played by other mock flags than `--fault CASE`."""


@pytest.mark.parametrize("fault", list(CASES))
def test_a_broken_server_gives_bounded_counted_errors(tmp_path: Path, fault: str) -> None:
    artifacts = tmp_path / "a"
    with running_mock(*MOCK_ARGS.get(fault, ("--fault", fault)), "--trickle-ms", "200") as server:
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS, sys.executable, "-m", "aiperf.cli", "profile", "--model", "mock",
             "--url", server.url, "--streaming", "--concurrency", "2", "--request-count", str(REQUESTS),
             "--request-timeout-seconds", "4", "--artifact-dir", str(artifacts)],
            env={**env(), **BOUNDS}, capture_output=True, text=True, timeout=RUN_BOUND_S)
        took = time.monotonic() - started
    peak_mb = int(run.stderr.rsplit("peak_rss_kb=", 1)[1]) / 1024
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    summary = json.loads((artifacts / "profile_export_aiperf.json").read_text())
    errors = {e["error_details"]["type"]: e["count"] for e in summary.get("error_summary", [])}
    records = [json.loads(line) for line in (artifacts / "profile_export.jsonl").read_text().splitlines()]
    print(f"{fault}: exit {run.returncode} in {took:.1f} s, peak RSS {peak_mb:.0f} MB, errors {errors}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(records) == REQUESTS
    assert summary["aiperf_extensions"]["accounting_balanced"], summary["aiperf_extensions"]["accounting_problems"]
    expected = CASES[fault]
    assert errors == ({expected: REQUESTS} if expected else {}), errors
    assert peak_mb < PEAK_RSS_BOUND_MB
