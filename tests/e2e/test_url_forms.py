"""`--url` as users write it (issue 25): a real `aiperf profile` against the mock for each form
AIPerf 0.13 accepts (a base URL with or without `/v1`, the full endpoint URL, no scheme, a custom
endpoint path, several URLs with `--url-strategy`): every request reaches the chat route and
succeeds, and the server metrics are scraped from `/metrics` at the server's root."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e._harness import aiperf

from aiperf.mock_server.testing import MockProcess, running_mock

pytestmark = pytest.mark.slow

MOCK = ("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "4")
REQUESTS = 6
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def mock() -> Iterator[MockProcess]:
    with running_mock(*MOCK) as server:
        yield server


def _chat_ok(url: str) -> int:
    """The mock's count of chat requests answered 200 so far."""
    with urllib.request.urlopen(url + "/stats", timeout=30) as answer:
        return int(json.loads(answer.read())["requests_by_endpoint"].get(CHAT, {}).get("200", 0))


def _profile(tmp_path: Path, *args: str) -> tuple[int, dict[str, object]]:
    """Run `aiperf profile ARGS` (a few streaming chat requests); the profiling `ok` count and
    the server-metrics export."""
    run = aiperf("profile", "--model", "mock", *args, "--streaming", "--concurrency", "2", "--request-count",
                 str(REQUESTS), "--workers-max", "1", "--record-processors", "1", "--isl", "16",
                 artifacts=tmp_path / "a")
    assert run.code == 0, run.stderr[-2000:]
    metrics = json.loads((tmp_path / "a" / "server_metrics_export.json").read_text())
    return int(run.accounting()["accounting"]["profiling"]["ok"]), metrics


@pytest.mark.parametrize("form", ["{base}", "{base}/v1", "{base}/v1/", "{base}/v1/chat/completions",
                                  "{hostport}", "{hostport}/v1", "--endpoint /chat/completions {base}/v1",
                                  "--custom-endpoint /v1/chat/completions {hostport}"])
def test_each_url_form_reaches_the_chat_route(tmp_path: Path, mock: MockProcess, form: str) -> None:
    *flags, url = form.format(base=mock.url, hostport=mock.url.removeprefix("http://")).split()
    before = _chat_ok(mock.url)
    ok, metrics = _profile(tmp_path, *flags, "--url", url)
    assert ok == REQUESTS and _chat_ok(mock.url) - before == REQUESTS
    assert metrics["summary"]["endpoints_successful"] == [mock.url + "/metrics"]  # type: ignore[index]


def test_several_urls_with_the_round_robin_strategy(tmp_path: Path, mock: MockProcess) -> None:
    with running_mock(*MOCK) as other:
        before = (_chat_ok(mock.url), _chat_ok(other.url))
        ok, metrics = _profile(tmp_path, "--url", f"{mock.url}/v1", other.url.removeprefix("http://"),
                               "--url-strategy", "round-robin")
        assert ok == REQUESTS
        assert (_chat_ok(mock.url) - before[0], _chat_ok(other.url) - before[1]) == (REQUESTS // 2, REQUESTS // 2)
    assert metrics["summary"]["endpoints_successful"] == [mock.url + "/metrics", other.url + "/metrics"]  # type: ignore[index]
