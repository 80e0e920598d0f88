"""The worker's default HTTP/1.1 client: an asyncio `Protocol` per connection with the
httptools (llhttp) response parser, a keep-alive pool, and TLS through asyncio's `ssl`.

Why not a general client: the worker needs one thing done cheaply and exactly, a POST whose
every network read is stamped. Over plain TCP the stamp is the kernel's receive time of the read
(`aiperf.worker.rxstamp`: `SO_TIMESTAMPING` software stamps through `recvmsg`), so the event
loop's wake-up and whatever ran before the callback are not in it; over TLS it is taken first
thing in `data_received`, before any parsing. The body bytes of that read (chunked framing
removed) become one `Exchange` chunk with that stamp. So an SSE event split over reads is stamped by the read that completed it, and two events
in one read share its stamp, whatever the event loop was doing when the waiting task woke up. The request's clock
(`Exchange.start_ns`) starts right before its first packet: the connect (SYN) of a new
connection (so TTFT includes connection setup, as AIPerf 0.13.0's, whose start precedes
aiohttp's connection acquire), the write on a reused one.

Contract (`Transport.post`): failures never raise, they set `Exchange.error` with the same types
the aiohttp client used (`ConnectionError`, `ReadIdleTimeout`, `ResponseTooLarge`,
`ClientPayloadError` for a body cut short, `ServerDisconnectedError` for a connection closed
before the status line, `ClientResponseError` for an unparsable response). Only cancellation
propagates; a cancelled exchange's connection is closed, never reused. The wire trace
(`Exchange.http_trace`) is always filled: its cost is a few integer stores per read.

Keep-alive against servers that close connections (llama.cpp's cpp-httplib, nginx, ...): a pooled
connection is reused only if the server has not closed it (a non-blocking `MSG_PEEK` on the
socket right before reuse sees a FIN or a reset the event loop has not processed yet), it has
been idle for less than the server's `Keep-Alive: timeout=N` (minus a margin) and our own
`keepalive_s`, and the server allowed more requests on it (`Connection: close`, `Keep-Alive:
max=0`). A server can still close a connection just as the request goes out; when a request on a
reused connection meets EOF or a reset before any byte of the response, it is sent once more on
a new connection (the server cannot have answered it), its timing restarts at that second send,
and the wire trace says so (`HttpTrace.retries`, `retry_reason`). Any other early close is a
transport error. A server seen closing connections right after streamed responses (llama.cpp
does, whatever its Keep-Alive header says) gets no more reuse after streamed responses.

Must be used inside one running asyncio event loop (uvloop in production).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import math
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import httptools
import structlog

from aiperf.config import MAX_RESPONSE_BYTES_ENV, READ_IDLE_TIMEOUT_ENV, HttpOptions
from aiperf.messages import ErrorDetails
from aiperf.worker.exchange import DEFAULT_LIMITS, KEEPALIVE_S, Exchange
from aiperf.worker.rxstamp import StampedTransport

log = structlog.get_logger("aiperf.worker.h1")

_perf_ns = time.perf_counter_ns
_mono = time.monotonic

DNS_TTL_S = 10.0
"""How long a resolved host name is reused (aiohttp's default)."""

_Key = tuple[str, str, int] | tuple[str, str, int, str]
"""A pool of connections: (scheme, host, port), and the lane when not the shared pool."""
"""(scheme, host, port) of a pool."""


PREMATURE_CLOSE_S = 1.0
"""A server that closes a kept connection within this long of a streamed response (found closed
at reuse, or closing a reused one unanswered) closes after every streamed response (llama.cpp's
cpp-httplib does, though it answers `Keep-Alive: timeout=5, max=100`): the pool stops keeping
that server's connections after streamed responses."""
KEEPALIVE_MARGIN_S = 1.0
"""A connection is not reused once idle for the server's `Keep-Alive: timeout` minus this (at
most half the timeout): the server's idle clock started before ours, when it sent the end."""


class _Failure(Exception):
    """Ends an exchange with `ErrorDetails(type, message)`. `retriable`: the server closed a
    reused connection before sending any byte of the response (it cannot have answered)."""

    def __init__(self, type_: str, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.type, self.message, self.retriable = type_, message, retriable


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection carrying one exchange at a time.

    Per read: one clock read, counters, one parser call; the body parts the parser hands back
    for that read are joined into one chunk stamped with the read's time (streaming), or kept
    for one chunk at the end (not streaming)."""

    __slots__ = ("transport", "sock", "connected_ns", "served", "idle_since", "lost", "server_idle_s",
                 "last_streamed", "_ex", "_parser", "_done", "_parts", "_size", "_cap", "_streaming", "_headers_done",
                 "_complete", "_eof_body", "_last_read", "_timer", "_idle_s", "_loop", "_keep", "_now",
                 "_clock")

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], int] = _perf_ns,
                 sock: socket.socket | None = None) -> None:
        self._loop, self._clock = loop, clock
        self.transport: asyncio.Transport | None = None
        self.sock = sock
        self.server_idle_s = math.inf
        self.last_streamed = False  # the last exchange that ended here was a streaming one
        self.connected_ns = 0
        self.served = 0
        self.idle_since = 0.0
        self.lost = False
        self._ex: Exchange | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._done: asyncio.Future[None] | None = None
        self._parts: list[bytes] = []
        self._size = 0
        self._cap = 0
        self._streaming = True
        self._headers_done = False
        self._complete = False
        self._eof_body = False
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._idle_s = 0.0
        self._keep = False
        self._now = 0

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connected_ns = self._clock()
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received(data, self._clock())

    def received(self, data: bytes, now: int) -> None:
        """One read of `data`, which arrived at `now` (`StampedTransport`: the kernel's receive
        time; an event loop's transport: the clock read first thing in `data_received`)."""
        ex = self._ex
        if ex is None or self._done is None or self._done.done():
            return  # bytes after the response (or with none asked for): the connection is not reused
        if not ex.reads:
            ex.recv_first_ns = now
        ex.recv_last_ns = now
        ex.recv_bytes += len(data)
        ex.reads += 1
        self._now = now
        self._last_read = _mono()
        parts = self._parts
        before = len(parts)
        try:
            self._parser.feed_data(data)  # type: ignore[union-attr]
        except httptools.HttpParserUpgrade:
            self._fail(_Failure("ClientResponseError", "the server switched protocols"))
            return
        except httptools.HttpParserError as exc:
            kind = "ClientPayloadError" if self._headers_done else "ClientResponseError"
            self._fail(_Failure(kind, f"invalid HTTP response: {exc}"))
            return
        if self._size > self._cap:
            self._fail(_Failure("ResponseTooLarge",
                                f"response body over {self._cap} bytes ({MAX_RESPONSE_BYTES_ENV})"))
            return
        if self._streaming and len(parts) > before:
            chunk = parts[before] if len(parts) == before + 1 else b"".join(parts[before:])
            ex.chunks.append(chunk)
            ex.chunk_ns.append(now)
            parts.clear()
            if ex.on_chunk is not None:
                ex.on_chunk(chunk, now)
        if self._complete:
            self._finish()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        done = self._done
        if done is None or done.done():
            return
        if self._eof_body and self._headers_done and exc is None:  # body delimited by the close
            self._complete = True
            self._keep = False
            if self._streaming and self._parts:
                self._parts.clear()
            self._finish()
            return
        if self._headers_done:
            reason = f"response payload is not completed: {exc}" if exc else "response payload is not completed"
            self._fail(_Failure("ClientPayloadError", reason))
            return
        ex = self._ex
        silent = ex is not None and not ex.reads
        where = "before any byte of the response" if silent else "before the end of the response headers"
        reason = f"server disconnected {where}: {exc}" if exc else f"server disconnected {where}"
        self._fail(_Failure("ServerDisconnectedError", reason,
                            retriable=silent and ex is not None and ex.reused))

    # -- httptools callbacks ------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        if lower == b"transfer-encoding" or lower == b"content-length":
            self._eof_body = False
        elif lower == b"keep-alive":
            self._server_keepalive(value)

    def _server_keepalive(self, value: bytes) -> None:
        """`Keep-Alive: timeout=N, max=M` (RFC 2068 19.7.1.1): N seconds idle before the server
        closes; M more requests allowed on this connection (0: none)."""
        for param in value.split(b","):
            key, _, number = param.strip().partition(b"=")
            try:
                n = float(number)
            except ValueError:
                continue
            if key.lower() == b"timeout" and n > 0:
                self.server_idle_s = max(n - min(KEEPALIVE_MARGIN_S, n / 2), 0.0)
            elif key.lower() == b"max" and n <= 0:
                self.server_idle_s = -1.0  # the server takes no more requests here

    def on_headers_complete(self) -> None:
        ex = self._ex
        assert ex is not None
        ex.headers_ns = self._now  # the read that completed the headers
        ex.status = self._parser.get_status_code()  # type: ignore[union-attr]
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        self._parts.append(body)

    def on_message_complete(self) -> None:
        self._complete = True
        self._keep = self._parser.should_keep_alive()  # type: ignore[union-attr]

    # -- one exchange -------------------------------------------------------------------------

    def start(self, ex: Exchange, request: bytes, *, streaming: bool, cap: int, idle_s: float) -> asyncio.Future[None]:
        """Write `request` and return the future that ends with the response (or its failure)."""
        self._ex, self._streaming, self._cap, self._idle_s = ex, streaming, cap, idle_s
        self._parser = httptools.HttpResponseParser(self)
        self._parts, self._size = [], 0
        self._headers_done = self._complete = self._keep = False
        self._eof_body = True  # until a Content-Length or Transfer-Encoding header says otherwise
        self._done = done = self._loop.create_future()
        ex.reused = self.served > 0
        if not ex.reused:
            ex.connected_ns = self.connected_ns
        self.served += 1
        transport = self.transport
        assert transport is not None
        ex.send_start_ns = now = _perf_ns()
        if ex.reused:  # the request's first packet is this write: its clock starts here
            ex.restamp(now)
        transport.write(request)
        ex.send_end_ns = _perf_ns()
        ex.sent_bytes += len(request)
        ex.writes += 1
        self._last_read = _mono()
        self._timer = self._loop.call_later(idle_s, self._check_idle)
        return done

    def _check_idle(self) -> None:
        """Fires `idle_s` after the last arming; re-arms for the time left when a read came since
        (one timer per exchange, not one per read)."""
        self._timer = None
        done = self._done
        if done is None or done.done():
            return
        left = self._last_read + self._idle_s - _mono()
        if left > 0:
            self._timer = self._loop.call_later(left, self._check_idle)
            return
        self._fail(_Failure("ReadIdleTimeout",
                            f"no data from the server for {self._idle_s:g}s ({READ_IDLE_TIMEOUT_ENV})"))

    def _finish(self) -> None:
        ex = self._ex
        assert ex is not None
        self.last_streamed = self._streaming
        if not self._streaming:
            parts = self._parts
            ex.chunks.append(parts[0] if len(parts) == 1 else b"".join(parts))
            ex.chunk_ns.append(self._clock())
            parts.clear()
        if not self._keep and self.transport is not None:
            self.transport.close()
            self.lost = True
        self._settle(None)

    def _fail(self, failure: _Failure) -> None:
        self._keep = False
        if self.transport is not None:
            self.transport.abort()
        self.lost = True
        self._settle(failure)

    def _settle(self, failure: _Failure | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        done = self._done
        if done is not None and not done.done():
            if failure is None:
                done.set_result(None)
            else:
                done.set_exception(failure)

    def expired(self, now: float, horizon: float) -> bool:
        """Whether this idle connection is past its keep-alive at `now` (monotonic s): idle
        since before `horizon` (ours) or for the server's keep-alive."""
        return self.idle_since <= horizon or now - self.idle_since >= self.server_idle_s

    def open(self) -> bool:
        """Whether the server has not closed this idle connection: the close the event loop
        processed, or one still unread in the socket (a non-blocking peek, ~2 us)."""
        sock = self.sock
        if self.lost or sock is None:
            return not self.lost
        try:
            sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True  # nothing to read: open
        except OSError:
            return False  # reset
        return False  # EOF, or bytes nobody asked for: either way not a clean connection

    def close(self) -> None:
        """Close the connection (gracefully: after what is written)."""
        if self.transport is not None and not self.lost:
            self.transport.close()
        self.lost = True

    def release(self) -> bool:
        """After the exchange: True when the connection may carry another one."""
        reusable = self._complete and self._keep and not self.lost
        self._ex = self._parser = None
        self._done = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not reusable and self.transport is not None and not self.lost:
            self.transport.abort()
            self.lost = True
        return reusable


class H1Transport:
    """`Transport` over pooled HTTP/1.1 connections, within the response bounds of `limits`.

    Connections are kept per (scheme, host, port), unlimited in number, reused last-in
    first-out, and dropped after `keepalive_s` idle (or the server's shorter keep-alive; see the
    module doc). `monotonic` is the clock of idle times. Call `close()` (or use it as an async
    context manager) to close the pool."""

    def __init__(self, limits: HttpOptions = DEFAULT_LIMITS, *, keepalive_s: float = KEEPALIVE_S,
                 ssl_context: ssl.SSLContext | None = None, monotonic: Callable[[], float] = _mono) -> None:
        self._limits, self._keepalive_s, self._monotonic = limits, keepalive_s, monotonic
        self._ssl = ssl_context
        self._idle: dict[_Key, list[Connection]] = {}
        self._dns: dict[tuple[str, int], tuple[float, list[tuple[int, tuple[str, int]]]]] = {}
        self._targets: dict[str, tuple[tuple[str, str, int], bytes]] = {}
        self._closes_after_stream: set[tuple[str, str, int]] = set()

    async def __aenter__(self) -> H1Transport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every idle connection (in-flight ones close when their exchange ends)."""
        for conns in self._idle.values():
            for conn in conns:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()

    def _target(self, url: str) -> tuple[tuple[str, str, int], bytes]:
        """(pool key, request-line-and-Host prefix) of `url`, cached per url."""
        hit = self._targets.get(url)
        if hit is None:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            if scheme not in ("http", "https") or not parts.hostname:
                raise _Failure("InvalidURL", f"not an http(s) URL: {url}")
            port = parts.port or (443 if scheme == "https" else 80)
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            host_header = parts.netloc.rsplit("@", 1)[-1]
            head = f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\n".encode("latin-1")
            hit = self._targets[url] = ((scheme, parts.hostname, port), head)
        return hit

    async def post(self, ex: Exchange, url: str, body: bytes, headers: Mapping[str, str], *,
                   streaming: bool, lane: str | None = None, keep: bool = True) -> None:
        """See `Transport.post`. Streaming: one chunk per network read that carried body bytes,
        stamped when the read arrived. Not streaming: the whole body as one chunk, stamped when
        it was complete. A `lane`'s connections are pooled apart from the shared ones (and
        from other lanes'); a connection that is not kept is closed once its response is in."""
        limits = self._limits
        ex.start_wall_ns = time.time_ns()
        ex.start_ns = _perf_ns()
        conn: Connection | None = None
        try:
            target, head = self._target(url)
            key = target if lane is None else (*target, lane)
            lines = [head]
            for name, value in headers.items():
                lines.append(f"{name}: {value}\r\n".encode("latin-1"))
            lines.append(b"Content-Length: %d\r\n\r\n" % len(body))
            lines.append(body)
            request = b"".join(lines)
            for attempt in (0, 1):  # a second only when a reused connection closed unanswered
                conn = await (self._connect(ex, key, url) if attempt else self._acquire(ex, key, url))
                try:
                    await conn.start(ex, request, streaming=streaming, cap=limits.max_response_bytes,
                                     idle_s=limits.read_idle_timeout_s)
                    break
                except _Failure as failure:
                    if attempt or not failure.retriable:
                        raise
                    self._closed_early(key, conn)
                    conn.release()
                    conn = None
                    ex.restart(failure.message)
                    ex.start_wall_ns = time.time_ns()
                    ex.start_ns = _perf_ns()
        except _Failure as failure:
            ex.error = ErrorDetails(type=failure.type, message=failure.message)
        except (OSError, UnicodeEncodeError) as exc:
            ex.error = ErrorDetails(type=type(exc).__name__, message=str(exc) or type(exc).__name__)
        finally:
            ex.end_ns = _perf_ns()
            if conn is not None and conn.release():
                if not keep or (streaming and key[:3] in self._closes_after_stream):
                    conn.close()
                else:
                    conn.idle_since = self._monotonic()
                    self._idle.setdefault(key, []).append(conn)

    async def _acquire(self, ex: Exchange, key: _Key, url: str) -> Connection:
        idle = self._idle.get(key)
        if idle:
            now = self._monotonic()
            horizon = now - self._keepalive_s
            while idle:
                conn = idle.pop()
                if not idle and len(key) > 3:
                    del self._idle[key]  # a lane's pool goes with its last connection
                if not conn.expired(now, horizon):
                    if conn.open():
                        return conn
                    self._closed_early(key, conn)
                conn.close()
        return await self._connect(ex, key, url)

    def _closed_early(self, key: _Key, conn: Connection) -> None:
        """The server closed `conn` while it was kept for reuse: learn a server that closes
        after every streamed response (`PREMATURE_CLOSE_S`)."""
        if (conn.last_streamed and key[:3] not in self._closes_after_stream
                and self._monotonic() - conn.idle_since < PREMATURE_CLOSE_S):
            self._closes_after_stream.add(key[:3])
            log.info("http.closes_after_stream", host=key[1], port=key[2],
                     note="the server closes connections after streamed responses; not reusing them")

    async def _connect(self, ex: Exchange, key: _Key, url: str) -> Connection:
        scheme, host, port = key[:3]
        loop = asyncio.get_running_loop()
        try:
            addresses = await self._resolve(ex, loop, host, port)
            context = None
            if scheme == "https":
                context = self._ssl or ssl.create_default_context()
            error: OSError | None = None
            for family, address in addresses:
                try:
                    sock = socket.socket(family, socket.SOCK_STREAM)
                    try:
                        sock.setblocking(False)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        await _connect_socket(loop, sock, address, ex)
                    except BaseException:
                        sock.close()
                        raise
                    if context is None:  # plain TCP: every read stamped by the kernel
                        conn = Connection(loop, sock=sock)
                        StampedTransport(loop, sock, conn)
                        return conn
                    _, conn = await loop.create_connection(
                        functools.partial(Connection, loop, sock=sock), sock=sock, ssl=context,
                        server_hostname=host)
                    return conn
                except OSError as exc:
                    error = exc
            assert error is not None
            raise error
        except (OSError, ssl.SSLError) as exc:
            raise _Failure("ConnectionError", f"cannot connect to {url}: {_reason(exc)}") from None

    async def _resolve(self, ex: Exchange, loop: asyncio.AbstractEventLoop, host: str,
                       port: int) -> list[tuple[int, tuple[str, int]]]:
        hit = self._dns.get((host, port))
        now = _mono()
        if hit is not None and hit[0] > now:
            return hit[1]
        ex.dns_start_ns = _perf_ns()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        ex.dns_end_ns = _perf_ns()
        addresses = [(family, address[:2]) for family, _, _, _, address in infos]
        if not addresses:
            raise OSError(f"no address for {host}")
        self._dns[(host, port)] = (now + DNS_TTL_S, addresses)  # type: ignore[assignment]
        return addresses  # type: ignore[return-value]


async def _connect_socket(loop: asyncio.AbstractEventLoop, sock: socket.socket, address: tuple[str, int],
                          ex: Exchange) -> None:
    """Connect the non-blocking `sock` to `address`. The request's clock restarts right before
    `connect()`, which sends the SYN at once (the event loop's `sock_connect` may first resolve
    the address in a thread); raises `OSError` when the connection fails."""
    ex.connect_start_ns = now = _perf_ns()
    ex.restamp(now)  # the request's first packet is the SYN
    err = sock.connect_ex(address)
    if err == errno.EINPROGRESS:
        ready: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()

        def writable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(fd, writable)
        try:
            await ready
        finally:
            loop.remove_writer(fd)
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, os.strerror(err))


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
