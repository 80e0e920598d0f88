"""The wire options: a delay before the response headers, Connection: close, and exact byte
counts of inference connections (--wire-stats)."""

from __future__ import annotations

import json
import socket
import statistics
import time
import urllib.request
from collections.abc import Callable

import aiohttp
import anyio
import orjson
import pytest

from aiperf.mock_server.testing import MockProcess

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi there"}], "max_tokens": 5,
                     "stream": True})


def _stats(server: MockProcess) -> dict[str, int]:
    stats: dict[str, int] = json.loads(urllib.request.urlopen(f"{server.url}/stats").read())
    return stats


def _raw_exchange(port: int, request: bytes) -> bytes:
    """Send `request` on a fresh connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        got = b""
        while data := sock.recv(65536):
            got += data
    return got


def test_wire_stats_count_exactly_the_bytes_of_inference_connections(
        start_mock: Callable[..., MockProcess]) -> None:
    server = start_mock("--wire-stats", "--itl-ms", "1")
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Connection: close\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
    responses = [_raw_exchange(server.port, request) for _ in range(3)]
    assert all(r.startswith(b"HTTP/1.1 200") and b"[DONE]" in r for r in responses)
    _raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    stats = _stats(server)
    assert stats["wire_connections"] == 3
    assert stats["wire_bytes_in"] == 3 * len(request)
    assert stats["wire_bytes_out"] == sum(len(r) for r in responses)
    assert stats["completed"] == 3


async def test_headers_delay_and_fresh_connections(start_mock: Callable[..., MockProcess]) -> None:
    delay_ms = 30.0
    server = start_mock("--headers-delay-ms", str(delay_ms), "--close-connections", "--ttft-ms", "10")
    created = 0

    async def on_create(*_: object) -> None:
        nonlocal created
        created += 1

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_create)
    waits: list[float] = []
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        for _ in range(6):
            t0 = time.perf_counter()
            async with session.post(f"{server.url}/v1/chat/completions", data=BODY) as resp:
                waits.append((time.perf_counter() - t0) * 1e3)
                assert resp.headers["Connection"].lower() == "close"
                text = await resp.read()
            assert text.count(b'"content"') == 5
            await anyio.sleep(0.01)
    assert created == 6  # every request needed a new connection
    assert delay_ms <= statistics.median(waits) <= delay_ms + 10
