"""`H1Transport` over real loopback sockets: a scripted raw server (exact bytes, closes and
stalls where the test says), TLS verified against a throwaway CA, and the error types the
worker records (the same as the aiohttp client's)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from aiperf.config import HttpOptions
from aiperf.testing.fake_kube_tls import make_tls_files
from aiperf.worker.exchange import Exchange
from aiperf.worker.h1 import H1Transport

pytestmark = pytest.mark.anyio

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


async def _request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    return head + await reader.readexactly(length)


@asynccontextmanager
async def _server(script: Script, context: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await script(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"{'https' if context else 'http'}://127.0.0.1:{port}/v1/chat/completions"


async def _post(transport: H1Transport, url: str) -> Exchange:
    ex = Exchange()
    await transport.post(ex, url, b'{"x": 1}', {"Content-Type": "application/json"}, streaming=True)
    return ex


async def test_keepalive_reuse_and_request_bytes() -> None:
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(3):
            seen.append(await _request(reader))
            writer.write(OK + b"6\r\ndata: \r\n3\r\nx\n\n\r\n0\r\n\r\n")
            await writer.drain()

    async with _server(serve) as url, H1Transport() as transport:
        exchanges = [await _post(transport, url) for _ in range(3)]
    assert [ex.reused for ex in exchanges] == [False, True, True]
    assert all(b"".join(ex.chunks) == b"data: x\n\n" and ex.error is None for ex in exchanges)
    assert seen[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    assert seen[0].endswith(b"Content-Length: 8\r\n\r\n{\"x\": 1}")


async def test_connection_reuse_lanes_and_closing_after_the_response() -> None:
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(0)
        while not reader.at_eof():
            try:
                await _request(reader)
            except asyncio.IncompleteReadError:
                return
            connections[-1] += 1
            writer.write(OK + b"6\r\ndata: \r\n3\r\nx\n\n\r\n0\r\n\r\n")
            await writer.drain()

    async def post(transport: H1Transport, url: str, lane: str | None, keep: bool) -> bool:
        ex = Exchange()
        await transport.post(ex, url, b"{}", {}, streaming=True, lane=lane, keep=keep)
        assert ex.error is None
        return ex.reused

    async with _server(serve) as url, H1Transport() as transport:
        # never: a new connection each time
        assert [await post(transport, url, None, False) for _ in range(2)] == [False, False]
        # sticky sessions: a conversation's turns share its own connection, not the pool's
        assert await post(transport, url, None, True) is False
        assert [await post(transport, url, "conv-a", True), await post(transport, url, "conv-b", True)] == [False, False]
        assert await post(transport, url, "conv-a", False) is True  # its final turn: closed after
        assert await post(transport, url, "conv-a", True) is False
        assert await post(transport, url, None, True) is True
    assert sorted(connections) == [1, 1, 1, 1, 2, 2]


async def test_error_types() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(OK + b"6\r\ndata: \r\n")
        await writer.drain()
        writer.transport.abort()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        await asyncio.sleep(5)

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(OK)
        for _ in range(100):
            writer.write(b"400\r\n" + b"a" * 1024 + b"\r\n")
            await writer.drain()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"SPAM\r\n\r\n")
        await writer.drain()

    limits = HttpOptions(read_idle_timeout_s=0.3, max_response_bytes=16 * 1024)
    got = {}
    async with H1Transport(limits) as transport:
        for name, script in {"reset": reset, "silent": silent, "endless": endless, "garbage": garbage}.items():
            async with _server(script) as url:
                ex = await _post(transport, url)
                assert ex.error is not None and ex.end_ns >= ex.start_ns > 0
                got[name] = ex.error.type
        refused = await _post(transport, "http://127.0.0.1:9/v1/chat/completions")
    assert got == {"reset": "ClientPayloadError", "silent": "ReadIdleTimeout", "endless": "ResponseTooLarge",
                   "garbage": "ClientResponseError"}
    assert refused.error is not None and refused.error.type == "ConnectionError"
    assert "cannot connect to http://127.0.0.1:9" in refused.error.message


async def test_https_is_verified(tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path, "127.0.0.1")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\ndata: x\n\n")
        await writer.drain()

    async with _server(serve, tls.server_context()) as url:
        trusting = ssl.create_default_context(cafile=str(tls.ca))
        async with H1Transport(ssl_context=trusting) as transport:
            ok = await _post(transport, url)
        async with H1Transport() as transport:  # the system CAs do not know this one
            untrusted = await _post(transport, url)
    assert ok.error is None and ok.status == 200 and ok.chunks == [b"data: x\n\n"]
    assert untrusted.error is not None and untrusted.error.type == "ConnectionError"
