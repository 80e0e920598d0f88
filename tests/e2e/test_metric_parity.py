"""Issue 14 acceptance: the metrics AIPerf 0.13 exports, from a real `aiperf profile` run (CLI,
services as processes) against the real mock server.

Timing is judged against references taken in the same run, never against sleeps: the mock
counts the bytes on the wire, the closed loop's own turnaround comes from the per-request
records, and a minimal socket client measures the loopback's time to first byte against the
same mock.
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from e2e._harness import Run, aiperf, aiperf_process, finish
from e2e._references import RunQueueWait

from aiperf.mock_server.testing import MockProcess, running_mock

WORKER = r"aiperf\.worker\.main"

pytestmark = pytest.mark.slow

RECORD = frozenset({"avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
                    "std", "count"})
SWEEP = frozenset({"avg", "min", "max", "p50", "p90", "p95", "p99", "std"})
SCALAR = frozenset({"avg"})

_TPS, _TPSU = "tokens/sec", "tokens/sec/user"
ISSUE_METRICS: dict[str, tuple[str, frozenset[str]]] = {
    # time-weighted (sweep line)
    "effective_concurrency": ("requests", SWEEP), "effective_prefill_concurrency": ("requests", SWEEP),
    "effective_decode_concurrency": ("requests", SWEEP), "effective_total_throughput": (_TPS, SWEEP),
    "effective_prefill_throughput": (_TPS, SWEEP), "effective_decode_throughput": (_TPS, SWEEP),
    "effective_prefill_throughput_per_user": (_TPSU, SWEEP),
    "effective_decode_throughput_per_user": (_TPSU, SWEEP),
    "active_total_throughput": (_TPS, SWEEP), "active_prefill_throughput": (_TPS, SWEEP),
    "active_decode_throughput": (_TPS, SWEEP), "active_prefill_throughput_per_user": (_TPSU, SWEEP),
    "active_decode_throughput_per_user": (_TPSU, SWEEP), "tokens_in_flight": ("tokens", SWEEP),
    # HTTP timing per request (k6 names)
    **{f"http_req_{t}": ("ms", RECORD) for t in ("blocked", "dns_lookup", "connecting", "sending", "waiting",
                                                 "receiving", "duration", "total", "connection_overhead")},
    "http_req_connection_reused": ("ratio", RECORD), "http_req_data_sent": ("KB", RECORD),
    "http_req_data_received": ("KB", RECORD), "http_req_chunks_sent": ("count", RECORD),
    "http_req_chunks_received": ("count", RECORD),
    # accounting and usage
    "request_error_rate": ("%", SCALAR), "osl_mismatch_count": ("requests", SCALAR),
    "osl_mismatch_diff_pct": ("%", RECORD), "total_usage_prompt_tokens": ("tokens", SCALAR),
    "total_usage_completion_tokens": ("tokens", SCALAR), "total_usage_total_tokens": ("tokens", SCALAR),
}
assert len(ISSUE_METRICS) == 34

TODAY_METRICS = frozenset({
    "request_throughput", "request_latency", "request_count", "time_to_first_token", "time_to_second_token",
    "inter_token_latency", "output_token_throughput", "output_token_throughput_per_user",
    "output_sequence_length", "input_sequence_length", "output_token_count", "inter_chunk_latency",
    "total_output_tokens", "benchmark_duration", "total_isl", "total_osl", "decode_duration",
    "time_to_first_output_token", "usage_prompt_tokens", "usage_completion_tokens", "usage_total_tokens",
    "e2e_output_token_throughput", "prefill_throughput_per_user", "credit_to_start_latency",
    "effective_latency", "completed_request_count", "input_token_throughput", "total_token_throughput",
})
"""The metrics a streaming run without errors or goodput exported before issue 14."""

PER_RECORD = frozenset(t for t, (_, shape) in ISSUE_METRICS.items() if shape is RECORD)
"""The new metrics AIPerf writes per request in profile_export.jsonl."""

CONCURRENCY = 4


def _stats(server: MockProcess) -> dict[str, Any]:
    stats: dict[str, Any] = json.loads(urllib.request.urlopen(f"{server.url}/stats").read())
    return stats


def _metric_keys(summary: dict[str, Any]) -> set[str]:
    return {k for k, v in summary.items() if isinstance(v, dict) and "unit" in v}


def _csv_sections(text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    first, second = text.split("\n\n", 1)
    stats_rows = list(csv.reader(io.StringIO(first)))
    assert stats_rows[0] == ["Metric", "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90",
                             "p95", "p99", "std"]
    scalar_rows = list(csv.reader(io.StringIO(second)))
    assert scalar_rows[0] == ["Metric", "Value"]
    return {r[0]: r[1:] for r in stats_rows[1:]}, {r[0]: r[1] for r in scalar_rows[1:] if r}


@pytest.fixture(scope="module")
def loaded_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict[str, Any]]:
    """Closed loop at concurrency 4, ~0.5 s requests (first byte held 20 ms, first token at
    40 ms, 32 tokens 15 ms apart), the mock counting wire bytes and busy time."""
    artifacts = tmp_path_factory.mktemp("parity") / "a"
    with running_mock("--wire-stats", "--headers-delay-ms", "20", "--ttft-ms", "40", "--itl-ms", "15") as server:
        run = aiperf("profile", "--model", "mock", "--url", server.url, "--endpoint-type", "chat", "--streaming",
                     "--concurrency", str(CONCURRENCY), "--request-count", "64", "--isl", "64", "--osl", "32",
                     "--random-seed", "7", artifacts=artifacts)
        stats = _stats(server)
    assert run.code == 0, run.stderr
    return run, stats


def test_summary_keys_units_and_stats_shapes(loaded_run: tuple[Run, dict[str, Any]]) -> None:
    run, _ = loaded_run
    summary = run.summary()
    assert _metric_keys(summary) == set(ISSUE_METRICS) | TODAY_METRICS
    for tag, (unit, shape) in ISSUE_METRICS.items():
        assert summary[tag]["unit"] == unit, tag
        assert set(summary[tag]) - {"unit"} == shape, tag
    assert summary["request_error_rate"]["avg"] == 0.0
    assert summary["osl_mismatch_count"]["avg"] == 0  # the mock honours max_completion_tokens
    assert summary["osl_mismatch_diff_pct"]["max"] == 0.0
    assert summary["total_usage_completion_tokens"]["avg"] == 64 * 32
    reused = summary["http_req_connection_reused"]
    assert reused["sum"] == 64 - CONCURRENCY  # one fresh connection per concurrent slot, then reuse


def test_csv_jsonl_console_and_artifact_files(loaded_run: tuple[Run, dict[str, Any]]) -> None:
    from aiperf.metrics import spec_of

    run, _ = loaded_run
    stats_rows, scalars = _csv_sections((run.artifacts / "profile_export_aiperf.csv").read_text())
    for tag, (unit, shape) in ISSUE_METRICS.items():
        spec = spec_of(tag)
        label = spec.header if unit in {"requests", "count"} else f"{spec.header} ({unit})"
        if shape is SCALAR:
            assert label in scalars, label
        else:
            assert label in stats_rows, label
            filled = {k for k, v in zip(["avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75",
                                         "p90", "p95", "p99", "std"], stats_rows[label], strict=True) if v}
            assert filled == shape - {"count"}, label
    records = run.records()
    assert len(records) == 64
    for record in records:
        metrics = record["metrics"]
        assert PER_RECORD <= set(metrics), PER_RECORD - set(metrics)
        for tag in PER_RECORD:
            assert metrics[tag]["unit"] == ISSUE_METRICS[tag][0], tag
    console = (run.artifacts / "profile_export_console.txt").read_text()
    assert "LLM Metrics: Effective" in console and "Effective Concurrency" in console
    assert console.strip() in run.stdout
    names = {p.name for p in run.artifacts.iterdir()}
    assert {"profile_export_aiperf.json", "profile_export_aiperf.csv", "profile_export.jsonl",
            "profile_export_console.txt", "inputs.json"} <= names
    assert "dataset" not in names  # working files, not results


def test_data_sent_and_received_equal_the_bytes_on_the_wire(loaded_run: tuple[Run, dict[str, Any]]) -> None:
    run, stats = loaded_run
    records = run.records()
    sent = sum(r["metrics"]["http_req_data_sent"]["value"] * 1024 for r in records)
    received = sum(r["metrics"]["http_req_data_received"]["value"] * 1024 for r in records)
    assert stats["wire_connections"] == CONCURRENCY
    assert (sent, received) == (stats["wire_bytes_in"], stats["wire_bytes_out"])  # exact: KB = bytes / 1024


def test_effective_concurrency_is_the_configured_one_in_steady_state(
        loaded_run: tuple[Run, dict[str, Any]]) -> None:
    run, _ = loaded_run
    eff = run.summary()["effective_concurrency"]
    # The level the run holds most of the time is exactly the configured one.
    assert eff["p50"] == CONCURRENCY and eff["max"] == CONCURRENCY
    records = run.records()
    starts = sorted(r["metadata"]["request_start_ns"] for r in records)
    ends = sorted(r["metadata"]["request_end_ns"] for r in records)
    window = ends[-1] - starts[0]
    busy = sum(r["metadata"]["request_end_ns"] - r["metadata"]["request_start_ns"] for r in records)
    assert eff["avg"] == pytest.approx(busy / window, rel=1e-9)  # the sweep line, brute-forced
    # The mean also holds each slot's turnaround (a response's end to the next request's start
    # in the closed loop: the k-th end frees the slot of the (k+c)-th start), which a loaded
    # 2-core machine stretches to ~3% of a 0.5 s request. Measured in this run and taken out,
    # what remains (the ramp up and the drain) must cost under 2%: that is the steady state.
    turnaround = sum(starts[k + CONCURRENCY] - ends[k] for k in range(len(ends) - CONCURRENCY))
    steady = eff["avg"] + turnaround / window
    assert abs(steady - CONCURRENCY) <= 0.02 * CONCURRENCY, (eff["avg"], steady)


def _raw_ttfb_ms(port: int, n: int) -> list[tuple[int, float]]:
    """(wall ns at the send, ms from the last byte of a request written to the first byte read)
    by a plain socket client on a fresh connection each time (the loopback's own share)."""
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                         "max_completion_tokens": 2})
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    waits = []
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            wall, t0 = time.time_ns(), time.perf_counter()
            sock.recv(1)
            waits.append((wall, (time.perf_counter() - t0) * 1e3))
            while sock.recv(65536):
                pass
    return waits


def test_http_req_waiting_is_the_configured_time_to_first_byte(tmp_path: Path) -> None:
    headers_ms = 25.0
    with running_mock("--headers-delay-ms", str(headers_ms), "--ttft-ms", "30", "--itl-ms", "1") as server:
        assert server.proc is not None
        with RunQueueWait({os.getpid(): None, server.proc.pid: None}) as ref_waits:
            reference = _raw_ttfb_ms(server.port, 15)
        proc = aiperf_process("profile", "--model", "mock", "--url", server.url, "--streaming", "--concurrency",
                              "1", "--request-count", "30", "--isl", "32", "--osl", "4", "--keep-dataset-files",
                              artifacts=tmp_path / "a")
        with RunQueueWait({proc.pid: WORKER, server.proc.pid: None}) as run_waits:
            run = finish(proc, tmp_path / "a")
    assert run.code == 0, run.stderr
    ours, ours_less = [], []
    for r in run.records():
        m, start = r["metrics"], r["metadata"]["request_start_ns"]
        waiting = m["http_req_waiting"]["value"]
        first_byte_ms = sum(m[k]["value"] for k in ("http_req_blocked", "http_req_connecting",
                                                    "http_req_sending")) + waiting
        ours.append(waiting)
        ours_less.append(waiting - run_waits.waited_ms(start, start + round(first_byte_ms * 1e6)))
    ref = [w for _, w in reference]
    ref_less = [w - ref_waits.waited_ms(wall, wall + round(w * 1e6)) for wall, w in reference]
    print(f"http_req_waiting median {statistics.median(ours):.3f} ms (less run-queue waits "
          f"{statistics.median(ours_less):.3f}); plain client {statistics.median(ref):.3f} ms (less waits "
          f"{statistics.median(ref_less):.3f}); mock holds {headers_ms} ms")
    # The mock holds the first byte for exactly `headers_ms` after the request arrives; what the
    # machine adds on top (scheduling, loopback) is what a plain client measures against the
    # same mock. Ours must be that within 0.5 ms: from above with what the worker and the mock
    # waited for a CPU taken out of ours, from below with it taken out of the plain client's
    # (tests/e2e/_references.py says why both are sound; on a quiet machine nothing waits).
    assert headers_ms <= statistics.median(ref), ref
    assert statistics.median(ours_less) <= statistics.median(ref) + 0.5
    assert statistics.median(ours) >= statistics.median(ref_less) - 0.5
    assert headers_ms <= statistics.median(ours), ours
    # --keep-dataset-files keeps the working files in the artifacts
    assert sorted(p.name for p in (run.artifacts / "dataset").iterdir() if p.suffix == ".dat")
