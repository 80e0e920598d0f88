"""The HTTP side of one request: a POST whose every network read is timestamped.

`Exchange` (`aiperf.worker.exchange`) is filled in place while the request runs, so a request
cut short (timeout, cancellation) still keeps the reads it got. `AiohttpTransport` is the
`Transport` over aiohttp (`AIPERF_HTTP_CLIENT=aiohttp`; the default client is
`aiperf.worker.h1`, which does not import this module); it never raises for request failures (they become `Exchange.error`), only
cancellation propagates.

Wire trace: a session from `new_session()` also notes where each request's bytes moved, for
the k6-style `http_req_*` metrics. Its connections speak through `_TapProtocol` (aiohttp's own
response protocol, counting each socket read) over a `_TapTransport` (the socket transport,
counting each write); the exchange whose task writes a request owns the connection's reads
until another exchange writes on it (HTTP/1.1: one request at a time per connection). The
connection-pool events (pool wait, DNS, connect start) come from aiohttp's `TraceConfig`.
Per read this costs one clock read and four additions.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from aiperf.config import MAX_RESPONSE_BYTES_ENV, READ_IDLE_TIMEOUT_ENV, HttpOptions
from aiperf.messages import ErrorDetails
from aiperf.worker.exchange import DEFAULT_LIMITS, KEEPALIVE_S, Exchange

_perf_ns = time.perf_counter_ns

_WRITING: ContextVar[Exchange | None] = ContextVar("aiperf_worker_exchange", default=None)
"""The exchange whose request the current task is sending (set by `AiohttpTransport.post`)."""


class _TapProtocol(ResponseHandler):
    """aiohttp's client protocol, also stamping and counting each socket read for the
    exchange that last wrote on this connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._ex: Exchange | None = None
        self._served = 0
        self._connected_ns = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._connected_ns = _perf_ns()  # after the TCP (and TLS) handshake
        super().connection_made(_TapTransport(transport, self))

    def data_received(self, data: bytes) -> None:
        ex = self._ex
        if ex is not None and data:
            now = _perf_ns()
            if not ex.reads:
                ex.recv_first_ns = now
            ex.recv_last_ns = now
            ex.recv_bytes += len(data)
            ex.reads += 1
        super().data_received(data)

    def writer(self) -> Exchange | None:
        """The exchange the current write belongs to (switching to it if it is new here)."""
        ex = _WRITING.get()
        if ex is not self._ex:
            self._ex = ex
            if ex is not None:
                ex.reused = self._served > 0
                if not ex.reused:
                    ex.connected_ns = self._connected_ns
                self._served += 1
                ex.send_start_ns = _perf_ns()
        return ex


class _TapTransport(asyncio.Transport):
    """The connection's socket transport, counting what is written through it."""

    __slots__ = ("_inner", "_tap")

    def __init__(self, inner: asyncio.BaseTransport, tap: _TapProtocol) -> None:
        super().__init__()
        self._inner: Any = inner
        self._tap = tap

    def write(self, data: Any) -> None:
        ex = self._tap.writer()
        self._inner.write(data)
        if ex is not None:
            ex.send_end_ns = _perf_ns()
            ex.sent_bytes += len(data)
            ex.writes += 1

    def writelines(self, list_of_data: Iterable[Any]) -> None:
        chunks = list(list_of_data)
        ex = self._tap.writer()
        self._inner.writelines(chunks)
        if ex is not None:
            ex.send_end_ns = _perf_ns()
            ex.sent_bytes += sum(len(c) for c in chunks)
            ex.writes += 1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._inner.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return bool(self._inner.is_closing())

    def close(self) -> None:
        self._inner.close()

    def abort(self) -> None:
        self._inner.abort()

    def pause_reading(self) -> None:
        self._inner.pause_reading()

    def resume_reading(self) -> None:
        self._inner.resume_reading()

    def is_reading(self) -> bool:
        return bool(self._inner.is_reading())

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._inner.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return int(self._inner.get_write_buffer_size())

    def get_write_buffer_limits(self) -> tuple[int, int]:
        limits: tuple[int, int] = self._inner.get_write_buffer_limits()
        return limits

    def can_write_eof(self) -> bool:
        return bool(self._inner.can_write_eof())

    def write_eof(self) -> None:
        self._inner.write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        protocol: asyncio.BaseProtocol = self._inner.get_protocol()
        return protocol


class _TapConnector(aiohttp.TCPConnector):
    """A `TCPConnector` whose connections are `_TapProtocol`s."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # partial is invariant to mypy, but a _TapProtocol is the ResponseHandler aiohttp expects
        self._factory = functools.partial(_TapProtocol, loop=self._loop)  # type: ignore[assignment]


def _stamp(field: str) -> Any:
    async def hook(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: object) -> None:
        ex = ctx.trace_request_ctx
        if isinstance(ex, Exchange):
            setattr(ex, field, _perf_ns())
    return hook


def trace_config() -> aiohttp.TraceConfig:
    """The pool events an `Exchange` records (its trace context): pool wait, DNS, connect."""
    config = aiohttp.TraceConfig()
    config.on_connection_queued_start.append(_stamp("pool_wait_start_ns"))
    config.on_connection_queued_end.append(_stamp("pool_wait_end_ns"))
    config.on_dns_resolvehost_start.append(_stamp("dns_start_ns"))
    config.on_dns_resolvehost_end.append(_stamp("dns_end_ns"))
    config.on_connection_create_start.append(_stamp("connect_start_ns"))
    return config


def new_session(*, trace: bool = True) -> aiohttp.ClientSession:
    """The worker's HTTP client: unlimited pooled keep-alive connections, no client-side
    timeout (the worker enforces `--request-timeout-seconds` itself), and (`trace`) the wire
    trace of each exchange. Must be created inside the event loop and closed (it is an async
    context manager)."""
    kind = _TapConnector if trace else aiohttp.TCPConnector
    connector = kind(limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_S)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                 raise_for_status=False, trace_configs=[trace_config()] if trace else None)


class ResponseTooLarge(Exception):
    """The body passed `HttpOptions.max_response_bytes`."""


class AiohttpTransport:
    """`Transport` over one shared `aiohttp.ClientSession` (owned by the caller), within the
    response bounds of `limits` (`HttpOptions`: an idle-read timeout and a body size cap)."""

    __slots__ = ("_session", "_limits", "_timeout")

    def __init__(self, session: aiohttp.ClientSession, limits: HttpOptions = DEFAULT_LIMITS) -> None:
        self._session, self._limits = session, limits
        self._timeout = aiohttp.ClientTimeout(total=None, sock_read=limits.read_idle_timeout_s)

    async def post(self, ex: Exchange, url: str, body: bytes, headers: Mapping[str, str], *,
                   streaming: bool, lane: str | None = None, keep: bool = True) -> None:
        """See `Transport.post`; this client has one shared pool (`lane` is not kept apart) and
        closes a connection that is not kept (`Connection: close`). Streaming records each `iter_any()` read as one chunk;
        non-streaming records the whole body as one chunk stamped when it was complete. No byte
        for `read_idle_timeout_s` (headers included) sets a `ReadIdleTimeout` error; a body
        beyond `max_response_bytes` a `ResponseTooLarge` one (the chunks so far are kept, the
        connection is dropped)."""
        chunks, chunk_ns, cap = ex.chunks, ex.chunk_ns, self._limits.max_response_bytes
        token = _WRITING.set(ex)
        ex.start_wall_ns = time.time_ns()
        ex.start_ns = _perf_ns()
        try:
            if not keep:
                headers = {**headers, "Connection": "close"}
            async with self._session.post(url, data=body, headers=headers, trace_request_ctx=ex,
                                          timeout=self._timeout) as resp:
                ex.headers_ns = _perf_ns()
                ex.status = resp.status
                size = 0
                if streaming:
                    async for data in resp.content.iter_any():
                        chunk_ns.append(now := _perf_ns())
                        chunks.append(data)
                        if ex.on_chunk is not None:
                            ex.on_chunk(data, now)
                        size += len(data)
                        if size > cap:
                            raise ResponseTooLarge
                else:
                    parts = []
                    async for data in resp.content.iter_any():
                        parts.append(data)
                        size += len(data)
                        if size > cap:
                            raise ResponseTooLarge
                    chunk_ns.append(_perf_ns())
                    chunks.append(b"".join(parts))
        except ResponseTooLarge:
            ex.error = ErrorDetails(type="ResponseTooLarge",
                                    message=f"response body over {cap} bytes ({MAX_RESPONSE_BYTES_ENV})")
        except aiohttp.ServerTimeoutError:
            ex.error = ErrorDetails(type="ReadIdleTimeout",
                                    message=f"no data from the server for {self._limits.read_idle_timeout_s:g}s "
                                            f"({READ_IDLE_TIMEOUT_ENV})")
        except aiohttp.ClientConnectorError as exc:
            ex.error = ErrorDetails(type="ConnectionError",
                                    message=f"cannot connect to {url}: {_reason(exc.os_error)}")
        except (aiohttp.ClientError, OSError) as exc:
            ex.error = ErrorDetails(type=type(exc).__name__, message=str(exc) or type(exc).__name__)
        finally:
            ex.end_ns = _perf_ns()
            _WRITING.reset(token)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
