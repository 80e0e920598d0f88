"""The readiness probe of `--wait-for-model-*` (AIPerf 0.13.0's): what it asks, when a URL counts
as ready, when the run gives up; once against a real HTTP server that is not ready at first."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from aiperf.config import Endpoint
from aiperf.system_controller.readiness import (
    Answer,
    NotReady,
    inference_probe,
    models_url,
    probe_headers,
    wait_for_model,
    wait_until_ready,
)


class FakeClock:
    """Time that moves only when slept."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def endpoint(**fields: object) -> Endpoint:
    return Endpoint(urls=["http://h:9/v1"], wait_for_model_timeout=10.0, wait_for_model_interval=1.0,
                    **fields)  # type: ignore[arg-type]


def scripted(*answers: Answer) -> tuple[list[tuple[str, bytes | None]], object]:
    """A fetch that answers `answers` in turn (the last one forever), and the requests it got."""
    asked: list[tuple[str, bytes | None]] = []

    def fetch(url: str, body: bytes | None, headers: Mapping[str, str], timeout: float) -> Answer:
        asked.append((url, body))
        return answers[min(len(asked), len(answers)) - 1]

    return asked, fetch


def test_inference_probe_posts_one_token_where_requests_go() -> None:
    url, body = inference_probe(endpoint(), "m", 0)
    assert url == "http://h:9/v1/chat/completions"
    assert json.loads(body) == {"messages": [{"role": "user", "content": "Lo"}], "max_tokens": 1, "model": "m"}
    url, body = inference_probe(endpoint(type="completions"), "m", 0)
    assert (url, json.loads(body)) == ("http://h:9/v1/completions", {"prompt": "Lo", "max_tokens": 1, "model": "m"})
    assert models_url(endpoint(), 0) == "http://h:9/v1/models"


def test_inference_retries_connection_errors_and_5xx_and_takes_any_status_below_500() -> None:
    clock = FakeClock()
    asked, fetch = scripted(Answer(None, error="refused"), Answer(503), Answer(404))
    wait_until_ready(endpoint(), ["m"], headers={}, fetch=fetch, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert len(asked) == 3 and clock.now == 2.0


def test_models_mode_waits_for_the_model_in_the_list_and_falls_back_on_404() -> None:
    clock = FakeClock()
    listed = json.dumps({"data": [{"id": "other"}]}).encode()
    ready = json.dumps({"data": [{"id": "other"}, {"id": "m"}]}).encode()
    asked, fetch = scripted(Answer(200, listed), Answer(200, ready))
    wait_until_ready(endpoint(wait_for_model_mode="models"), ["m"], headers={}, fetch=fetch, clock=clock,  # type: ignore[arg-type]
                     sleep=clock.sleep)
    assert [a[0] for a in asked] == ["http://h:9/v1/models"] * 2
    asked, fetch = scripted(Answer(404), Answer(200))
    wait_until_ready(endpoint(wait_for_model_mode="both"), ["m"], headers={}, fetch=fetch, clock=clock,  # type: ignore[arg-type]
                     sleep=clock.sleep)
    assert [a[0] for a in asked] == ["http://h:9/v1/models", "http://h:9/v1", "http://h:9/v1/chat/completions"]


def test_gives_up_after_the_timeout_in_one_line() -> None:
    clock = FakeClock()
    asked, fetch = scripted(Answer(None, error="refused"))
    with pytest.raises(NotReady, match=r"^--wait-for-model-timeout: http://h:9/v1/chat/completions with model 'm' "
                                       r"not ready after 10s \(10 probe\(s\), one every 1s\)$"):
        wait_until_ready(endpoint(), ["m"], headers={}, fetch=fetch, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]


def test_no_timeout_no_probe_and_the_options_need_one() -> None:
    asked, fetch = scripted(Answer(200))
    wait_until_ready(Endpoint(), ["m"], headers={}, fetch=fetch)  # type: ignore[arg-type]
    assert asked == []
    with pytest.raises(ValueError, match="wait_for_model_mode: no effect unless wait_for_model_timeout"):
        Endpoint(wait_for_model_mode="models")


def test_headers_are_the_workers() -> None:
    env = {"AIPERF_API_KEY": "k", "AIPERF_HEADERS_JSON": '{"X-A": "b"}'}
    assert probe_headers(env) == {"Authorization": "Bearer k", "X-A": "b"}
    assert probe_headers({"AIPERF_HEADERS_JSON": "not json"}) == {}


@pytest.fixture
def warming_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server whose chat route answers 503 twice, then 200; the paths it was asked."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(f"{self.path} {self.headers.get('Authorization')}")
            self.send_response(503 if len(seen) <= 2 else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.anyio
async def test_against_a_real_server_that_warms_up(warming_server: tuple[str, list[str]]) -> None:
    url, seen = warming_server
    ready = Endpoint(urls=[url], wait_for_model_timeout=30.0, wait_for_model_interval=0.05)
    with anyio.fail_after(30):
        await wait_for_model(ready, ["m"], {"AIPERF_API_KEY": "k"})
    assert seen == ["/v1/chat/completions Bearer k"] * 3
