"""The real `aiperf profile` against a real inference server: llama.cpp's `llama-server` (built by
scripts/ci/llama-server.sh) serving a tiny random-weight model made at test time.

llama-server is a server we did not write: it closes every connection after a streamed response
(though it answers `Keep-Alive: timeout=5, max=100`), closes kept connections after 100 requests
and after 5 s idle, batches its slots, and reports its own `timings` and `usage` in each answer.
Every run here must come out with one balanced accounting that equals the error metrics, no
record caused by the client (no empty success from a closed connection), OSL equal to the
server's usage, TTFT/ITL consistent with the server's own timings, and the server's metrics and
identity in the exports and the dashboard.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser.conftest import Browser, child_env, wait_http
from e2e._harness import Run, aiperf, aiperf_process, finish
from e2e._references import RunQueueWait
from real._llama import MODEL_ALIAS, LlamaServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

OSL = 24


def profile(server: LlamaServer, artifacts: Path, *flags: str, osl: int = OSL) -> tuple[Run, RunQueueWait]:
    """`aiperf profile` of the tiny model; every answer is exactly `osl` tokens (ignore_eos).
    Also returns the run-queue waits of its processes and the server's meanwhile."""
    proc = aiperf_process("profile", "--model", MODEL_ALIAS, "--url", server.url, "--isl", "48", "--osl", str(osl),
                          "--extra-inputs", "ignore_eos:true", "--use-server-token-count", "--export-level", "raw",
                          *flags, artifacts=artifacts)
    with RunQueueWait({proc.pid: None, server.proc.pid: None}) as waits:
        run = finish(proc, artifacts, timeout=400)
    assert run.code == 0, f"{run.stderr[-3000:]}\nserver log:\n{server.log_tail()}"
    return run, waits


def raw_records(run: Run) -> list[dict[str, Any]]:
    lines = (run.artifacts / "profile_export_raw.jsonl").read_bytes().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def assert_one_accounting(run: Run, requests: int) -> dict[str, Any]:
    """Balanced, every request ok, and the accounting equal to the metrics' counts; returns the
    profiling phase's accounting."""
    ext = run.accounting()
    acc = ext["accounting"]["profiling"]
    assert ext["accounting_balanced"], ext["accounting_problems"]
    assert acc["issued"] == requests == acc["ok"] + acc["failed"] + acc["cancelled"] + acc["lost"]
    summary = run.summary()
    errors = summary.get("error_request_count", {"avg": 0})["avg"]
    assert summary["request_count"]["avg"] == acc["ok"] and errors == acc["failed"] + acc["lost"]
    failures = [(r["metadata"]["x_request_id"], r.get("error")) for r in run.records() if r.get("error")]
    assert not failures, f"errors against a healthy server (caused by the client): {failures[:5]}"
    assert acc["ok"] == requests
    return acc  # type: ignore[no-any-return]


def server_timings(record: dict[str, Any]) -> dict[str, float]:
    """llama.cpp's own `timings` of one raw record (the last SSE event or the JSON body)."""
    text = "".join(r["text"] for r in record["responses"])
    if text.lstrip().startswith("{"):
        return json.loads(text)["timings"]  # type: ignore[no-any-return]
    events = [e[6:] for e in text.split("\n\n") if e.startswith("data: {") and '"timings"' in e]
    return json.loads(events[-1])["timings"]  # type: ignore[no-any-return]


def assert_timing_matches_the_server(run: Run, waits: RunQueueWait, streamed: bool) -> None:
    """The client's figures against the server's own `timings`, per request. `waits` is what
    the client's and the server's threads waited for a CPU meanwhile (tests/e2e/_references.py):
    on an idle machine zero, under load what the load took, on either side (a server held off
    the CPU after its last token still counts that time in its timings). From below: the
    latency is never under the server's prompt + generation time less the waits (no answer is
    seen before it is made), TTFT never under its prompt time less the waits, and the median ITL
    (plus waits) over half the server's time per generated token. From above, less the waits:
    median excess of latency and of TTFT under 30 ms (HTTP, slot queueing, tokenizing), median
    ITL under twice the server's. ITL only over the requests whose tokens came in reads of their
    own (a client off the CPU while a whole answer arrives reads it at once: no gap), when five
    or more did."""
    timings = {r["metadata"]["x_request_id"]: server_timings(r) for r in raw_records(run)}
    latency_excess, ttft_excess, itl_ratio = [], [], []
    for record in run.records():
        t, m = timings[record["metadata"]["x_request_id"]], record["metrics"]
        assert m["output_sequence_length"]["value"] == t["predicted_n"] == m["usage_completion_tokens"]["value"]
        start, latency = record["metadata"]["request_start_ns"], m["request_latency"]["value"]

        def waited(lo_ms: float, hi_ms: float) -> float:
            return waits.waited_ms(start + round(lo_ms * 1e6), start + round(hi_ms * 1e6))  # noqa: B023

        latency_excess.append((latency - t["prompt_ms"] - t["predicted_ms"], waited(0, latency)))
        if not streamed:
            continue
        ttft = m["time_to_first_token"]["value"]
        ttft_excess.append((ttft - t["prompt_ms"], waited(0, ttft)))
        if m["http_req_chunks_received"]["value"] > t["predicted_n"]:
            decode, per_token = latency - ttft, t["predicted_per_token_ms"]
            during = waited(ttft, latency)
            itl_ratio.append(((decode + during) / (t["predicted_n"] - 1) / per_token,
                              max(decode - during, 0.0) / (t["predicted_n"] - 1) / per_token))
    for name, pairs in (("latency", latency_excess), ("ttft", ttft_excess)):
        if pairs:
            assert min(e + w for e, w in pairs) > -1.0, (name, sorted(pairs)[:5])
            assert statistics.median(e - w for e, w in pairs) < 30.0, (name, sorted(pairs)[::10])
    if len(itl_ratio) >= 5:
        assert statistics.median(r for r, _ in itl_ratio) > 0.5, sorted(itl_ratio)[::10]
        assert statistics.median(r for _, r in itl_ratio) < 2.0, sorted(itl_ratio)[::10]


def connections(run: Run) -> tuple[int, int, int]:
    """(requests on a new connection, on a reused one, retries after a close) from the wire trace."""
    traces = [r.get("http_trace") or {} for r in raw_records(run)]
    new = sum(1 for t in traces if not t.get("reused"))
    return new, len(traces) - new, sum(t.get("retries", 0) for t in traces)


def test_chat_streaming_against_a_server_that_closes_its_connections(
        chat_server: LlamaServer, tmp_path: Path, browser: Browser) -> None:
    """The issue's case: chat, streaming, c=4 x 100. llama-server closes each connection after a
    streamed answer: the client must never record an empty success for it."""
    run, waits = profile(chat_server, tmp_path / "chat", "--endpoint-type", "chat", "--streaming",
                  "--concurrency", "4", "--request-count", "100")
    assert_one_accounting(run, 100)
    assert_timing_matches_the_server(run, waits, streamed=True)
    assert run.metric("output_sequence_length") == OSL and run.metric("output_sequence_length", "max") == OSL
    new, reused, retries = connections(run)
    assert new == 100 and reused == 0  # the server closes after every streamed answer
    assert retries <= 4  # at most one per worker connection pool before it learns that
    server = run.accounting()["server"]
    assert server["server"] == "llama.cpp" and server["models"] == [MODEL_ALIAS]
    assert server["llamacpp"]["total_slots"] == 8
    metrics = json.loads((run.artifacts / "server_metrics_export.json").read_text())["metrics"]
    tokens = metrics["llamacpp:tokens_predicted"]["series"][0]["stats"]
    assert tokens["total"] == 100 * OSL  # the server's own count of the phase's tokens
    assert_dashboard_shows_the_server(run.artifacts, browser, metrics)


def assert_dashboard_shows_the_server(artifacts: Path, browser: Browser, metrics: dict[str, Any]) -> None:
    """`aiperf results serve` over the run's folder: its run page lists the server and every
    llamacpp:* series."""
    with subprocess.Popen([sys.executable, "-m", "aiperf.cli", "results", "serve", str(artifacts.parent),
                           "--port", "0"], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            url = next(line.split("http://", 1)[1].split()[0] for line in proc.stdout if "http://" in line)
            base = f"http://{url.rstrip('/')}"
            wait_http(base + "/api/v1/results", 30)
            with urllib.request.urlopen(f"{base}/api/v1/results/local/{artifacts.name}/runs", timeout=10) as answer:
                epoch = json.loads(answer.read())["latestEpoch"]
            browser.open(f"{base}/dashboard/run?ns=local&name={artifacts.name}&epoch={epoch}")
            shown = dict(line.split("\t", 1) for line in browser.text("#server").splitlines())
            assert shown["Server"] == "llama.cpp" and shown["Models"] == MODEL_ALIAS
            rows = browser.driver.find_elements("css selector", "#server-metrics tbody tr")
            assert {r.get_attribute("data-metric") for r in rows} == set(metrics)
            browser.screenshot("real-llama-run")
        finally:
            proc.terminate()


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "not-streaming"])
def test_completions(chat_server: LlamaServer, tmp_path: Path, streaming: bool) -> None:
    run, waits = profile(chat_server, tmp_path / "completions", "--endpoint-type", "completions",
                  *(["--streaming"] if streaming else []), "--concurrency", "4", "--request-count", "40")
    assert_one_accounting(run, 40)
    assert_timing_matches_the_server(run, waits, streamed=streaming)
    if not streaming:  # the server keeps connections after whole answers: the pool reuses them
        new, reused, retries = connections(run)
        assert new <= 4 and reused == 40 - new and retries == 0


def test_embeddings(embedding_server: LlamaServer, tmp_path: Path) -> None:
    run = aiperf("profile", "--model", MODEL_ALIAS, "--url", embedding_server.url, "--endpoint-type", "embeddings",
                 "--isl", "32", "--concurrency", "4", "--request-count", "40", artifacts=tmp_path / "emb")
    assert run.code == 0, run.stderr[-3000:]
    assert_one_accounting(run, 40)
    assert run.metric("request_latency") > 0


@pytest.mark.parametrize("concurrency", [1, 64])
def test_concurrency_against_eight_slots(chat_server: LlamaServer, tmp_path: Path, concurrency: int) -> None:
    """c=1 (one request at a time) and c=64 (56 waiting for one of the server's 8 slots)."""
    requests = 2 * concurrency + 20
    run, waits = profile(chat_server, tmp_path / f"c{concurrency}", "--endpoint-type", "chat", "--streaming",
                  "--concurrency", str(concurrency), "--request-count", str(requests), osl=16)
    assert_one_accounting(run, requests)
    if concurrency == 1:
        assert_timing_matches_the_server(run, waits, streamed=True)


def test_request_rate_mode(chat_server: LlamaServer, tmp_path: Path) -> None:
    run, waits = profile(chat_server, tmp_path / "rate", "--endpoint-type", "chat", "--streaming", "--request-rate", "40",
                  "--request-rate-mode", "constant", "--request-count", "60")
    assert_one_accounting(run, 60)
    assert_timing_matches_the_server(run, waits, streamed=True)


def test_every_kept_connection_is_closed_by_the_server_and_nothing_is_lost(
        chat_server: LlamaServer, tmp_path: Path) -> None:
    """Whole answers on 2 connections, 250 requests: the server ends each connection after its
    100th request (`Keep-Alive: max`), so each is closed by the server at least once."""
    run, _ = profile(chat_server, tmp_path / "max", "--endpoint-type", "chat", "--concurrency", "2",
                  "--request-count", "250", osl=4)
    assert_one_accounting(run, 250)
    new, reused, retries = connections(run)
    assert new >= 3 and reused == 250 - new and retries == 0


def test_an_idle_gap_past_the_servers_keep_alive(chat_server: LlamaServer, tmp_path: Path) -> None:
    """Three whole answers 5.5 s apart: past the server's `Keep-Alive: timeout=5`, so the
    connection kept after each is closed (or about to be) when the next request comes."""
    run, _ = profile(chat_server, tmp_path / "idle", "--endpoint-type", "chat", "--request-rate", str(1 / 5.5),
                  "--request-rate-mode", "constant", "--request-count", "3", osl=4)
    assert_one_accounting(run, 3)
    new, reused, retries = connections(run)
    assert (new, reused, retries) == (3, 0, 0)
