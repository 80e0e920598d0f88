"""The HTTP side of one request: a POST whose every network read is timestamped.

`Exchange` is filled in place while the request runs, so a request cut short (timeout,
cancellation) still keeps the reads it got. `AiohttpTransport` is the production
`Transport`; it never raises for request failures (they become `Exchange.error`), only
cancellation propagates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

import aiohttp

from aiperf.messages import ErrorDetails

_perf_ns = time.perf_counter_ns

KEEPALIVE_S = 15.0
"""Idle keep-alive of pooled connections (aiohttp's default; most servers close earlier)."""


class Exchange:
    """What one HTTP exchange observed so far. All `*_ns` are `perf_counter_ns()`; zero
    means "did not happen" (`start_ns == 0`: the request was never sent)."""

    __slots__ = ("start_ns", "start_wall_ns", "headers_ns", "end_ns", "status", "chunk_ns",
                 "chunks", "error")

    def __init__(self) -> None:
        self.start_ns = 0
        self.start_wall_ns = 0
        self.headers_ns = 0
        self.end_ns = 0
        self.status = 0
        self.chunk_ns: list[int] = []
        self.chunks: list[bytes] = []
        self.error: ErrorDetails | None = None


class Transport(Protocol):
    """Sends one POST and records it into an `Exchange`."""

    async def post(self, ex: Exchange, url: str, body: bytes, headers: Mapping[str, str], *,
                   streaming: bool) -> None:
        """Send `body` to `url`, filling `ex` as things happen.

        Promises: `ex.start_ns`/`start_wall_ns` are set right before the request goes out,
        `ex.end_ns` on every exit path (cancellation included). An HTTP status >= 400 is not an
        error here: its status and body are recorded like any other. Transport failures set
        `ex.error` and return. Only cancellation propagates.
        """
        ...


def new_session() -> aiohttp.ClientSession:
    """The worker's HTTP client: unlimited pooled keep-alive connections, no client-side
    timeout (the worker enforces `--request-timeout-seconds` itself). Must be created inside
    the event loop and closed (it is an async context manager)."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_S)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                 raise_for_status=False)


class AiohttpTransport:
    """`Transport` over one shared `aiohttp.ClientSession` (owned by the caller)."""

    __slots__ = ("_session",)

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def post(self, ex: Exchange, url: str, body: bytes, headers: Mapping[str, str], *,
                   streaming: bool) -> None:
        """See `Transport.post`. Streaming records each `iter_any()` read as one chunk;
        non-streaming records the whole body as one chunk stamped when it was complete."""
        chunks, chunk_ns = ex.chunks, ex.chunk_ns
        ex.start_wall_ns = time.time_ns()
        ex.start_ns = _perf_ns()
        try:
            async with self._session.post(url, data=body, headers=headers) as resp:
                ex.headers_ns = _perf_ns()
                ex.status = resp.status
                if streaming:
                    async for data in resp.content.iter_any():
                        chunk_ns.append(_perf_ns())
                        chunks.append(data)
                else:
                    data = await resp.read()
                    chunk_ns.append(_perf_ns())
                    chunks.append(data)
        except aiohttp.ClientConnectorError as exc:
            ex.error = ErrorDetails(type="ConnectionError",
                                    message=f"cannot connect to {url}: {_reason(exc.os_error)}")
        except (aiohttp.ClientError, OSError) as exc:
            ex.error = ErrorDetails(type=type(exc).__name__, message=str(exc) or type(exc).__name__)
        finally:
            ex.end_ns = _perf_ns()


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
