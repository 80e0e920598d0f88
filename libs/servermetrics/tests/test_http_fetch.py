"""`HttpFetch` against a real HTTP server on 127.0.0.1: the body as text, the headers sent,
an error status as `FetchError`, a refused connection as `OSError`, and a server that never
answers as the collector's timeout (the caller is not held by the abandoned thread)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aiperf.servermetrics import HttpFetch, ServerMetricsCollector
from aiperf.servermetrics.collector import FetchError

METRICS = "# TYPE requests_total counter\nrequests_total{model=\"m\"} 7\n# caf\u00e9\n"
pytestmark = pytest.mark.anyio


class _Handler(BaseHTTPRequestHandler):
    seen_headers: dict[str, str] = {}
    release = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        _Handler.seen_headers = dict(self.headers)
        if self.path == "/metrics":
            body = METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/metrics")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/slow":
            _Handler.release.wait(10)
        else:
            self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        _Handler.release.set()
        httpd.shutdown()
        httpd.server_close()
        _Handler.release.clear()


async def test_the_body_comes_back_as_text_with_the_headers_sent(server: str) -> None:
    async with HttpFetch(headers={"Authorization": "Bearer t0k"}) as fetch:
        assert await fetch(f"{server}/metrics", timeout_s=5) == METRICS
        assert _Handler.seen_headers["Authorization"] == "Bearer t0k"
        assert await fetch(f"{server}/moved", timeout_s=5) == METRICS


async def test_an_error_status_is_a_fetch_error(server: str) -> None:
    async with HttpFetch() as fetch:
        with pytest.raises(FetchError, match="HTTP 404"):
            await fetch(f"{server}/nothing", timeout_s=5)


async def test_a_refused_connection_is_an_os_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        async with HttpFetch() as fetch:
            with pytest.raises(ConnectionRefusedError):
                await fetch(f"http://127.0.0.1:{port}/metrics", timeout_s=5)


async def test_a_server_that_never_answers_times_out_in_the_collector(server: str) -> None:
    async with HttpFetch() as fetch:
        collector = ServerMetricsCollector(endpoints=[f"{server}/slow", f"{server}/metrics"], fetch=fetch,
                                           interval_s=1, timeout_s=0.3)
        started = time.monotonic()
        await collector.scrape()
        assert time.monotonic() - started < 5  # the abandoned GET does not hold the round
    (round_,) = collector.rounds
    assert round_.results[f"{server}/slow"] == "timed out"  # whichever timeout fires first
    assert "requests" in round_.results[f"{server}/metrics"]  # type: ignore[operator]  # counter family
