"""The api service's Prometheus /metrics, scraped during a real run of the CLI against the mock
server and parsed with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from e2e._harness import aiperf_process, finish, wait_for
from prometheus_client.parser import text_string_to_metric_families

from aiperf.mock_server.testing import held_port, running_mock, timeout_scale

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    """Every sample of `url` by (name, sorted labels); None while the api does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_during_a_real_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requests = ("aiperf_requests_total", (("phase", "profiling"),))
    progress = ("aiperf_phase_requests_completed", (("phase", "profiling"),))
    # The controller broadcasts its state and repeats it every STATE_EVERY_S (1 s), so the api
    # may learn it up to then after a change, but while requests flow it does learn it.
    profiling = ("aiperf_run_state", (("state", "profiling"),))
    # The api's port, held for it: nothing else takes it before the api listens.
    with held_port() as port, running_mock("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4",
                                           "--error-rate", "0.2", "--seed", "3") as mock:
        monkeypatch.setenv("AIPERF_API_PORT", str(port))
        url = f"http://127.0.0.1:{port}/metrics"
        proc = aiperf_process("profile", "--model", "mock", "--url", mock.url, "--endpoint-type", "chat",
                              "--streaming", "--request-rate", "20", "--request-count", "60",
                              artifacts=tmp_path / "a")
        seen: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []

        def scraped_requests() -> bool:
            samples = scrape(url)
            if samples is not None and samples.get(requests, 0) > 0 and progress in samples and profiling in samples:
                seen.append(samples)
            return bool(seen) or proc.poll() is not None

        wait_for(scraped_requests, 90 * timeout_scale(), "requests counted on /metrics")
        during = proc.poll() is None
        run = finish(proc, tmp_path / "a")
    assert run.code == 0, run.stderr
    assert seen and during, "no scrape saw requests while the run was going"
    samples = seen[-1]
    counted = samples[requests]
    assert 0 < counted <= 60
    errors = sum(v for (name, labels), v in samples.items() if name == "aiperf_request_errors_total")
    ttft = samples[("aiperf_time_to_first_token_seconds_count", (("phase", "profiling"),))]
    assert ttft + errors == counted
    assert samples[("aiperf_time_to_first_token_seconds_bucket", (("le", "+Inf"), ("phase", "profiling")))] == ttft
    assert [labels for (name, labels), v in samples.items() if name == "aiperf_run_state"] == [profiling[1]]
    assert 0 < samples[progress] <= 60
    assert samples[("aiperf_phase_requests_expected", (("phase", "profiling"),))] == 60
    # The run's own record agrees with what /metrics counted so far.
    assert len(run.records()) == 60
