"""What every HTTP client of the worker shares: the `Exchange` one request fills in place, the
`Transport` port that fills it, and the default limits.

Kept apart from the clients so the default one (`aiperf.worker.h1`) does not import aiohttp
(~0.5 s of CPU) for the aiohttp-based one (`aiperf.worker.http`, `AIPERF_HTTP_CLIENT=aiohttp`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from aiperf.config import HttpOptions
from aiperf.messages import ErrorDetails, HttpTrace

__all__ = ["DEFAULT_LIMITS", "KEEPALIVE_S", "Exchange", "Transport"]

KEEPALIVE_S = 15.0
"""Idle keep-alive of pooled connections, in both clients (aiohttp's default; most servers close
earlier)."""

DEFAULT_LIMITS = HttpOptions()


class Exchange:
    """What one HTTP exchange observed so far. All `*_ns` are `perf_counter_ns()`; zero
    means "did not happen" (`start_ns == 0`: the request was never sent). The wire fields
    (from `reused` on) are filled only by a client that traces the wire (both do; see
`aiperf.worker.h1`). `on_chunk`, when set, is called with each streamed chunk and its time as
it is recorded (from the event loop's read callback: it must be quick and never raise)."""

    __slots__ = ("on_chunk", "start_ns", "start_wall_ns", "headers_ns", "end_ns", "status", "chunk_ns",
                 "chunks", "error", "reused", "pool_wait_start_ns", "pool_wait_end_ns", "dns_start_ns",
                 "dns_end_ns", "connect_start_ns", "connected_ns", "send_start_ns", "send_end_ns",
                 "recv_first_ns", "recv_last_ns", "sent_bytes", "recv_bytes", "writes", "reads",
                 "retries", "retry_reason")

    def __init__(self) -> None:
        self.on_chunk: Callable[[bytes, int], None] | None = None
        self.start_ns = 0
        self.start_wall_ns = 0
        self.headers_ns = 0
        self.end_ns = 0
        self.status = 0
        self.chunk_ns: list[int] = []
        self.chunks: list[bytes] = []
        self.error: ErrorDetails | None = None
        self.reused = False
        self.pool_wait_start_ns = self.pool_wait_end_ns = 0
        self.dns_start_ns = self.dns_end_ns = 0
        self.connect_start_ns = self.connected_ns = 0
        self.send_start_ns = self.send_end_ns = 0
        self.recv_first_ns = self.recv_last_ns = 0
        self.sent_bytes = self.recv_bytes = self.writes = self.reads = 0
        self.retries = 0
        self.retry_reason = ""

    def restamp(self, now_ns: int) -> None:
        """Move the request's start to `now_ns` (its first packet is about to go: the SYN of a new
        connection, the write on a reused one), the wall-clock start with it."""
        if self.start_ns:
            self.start_wall_ns += now_ns - self.start_ns
        self.start_ns = now_ns

    def restart(self, reason: str) -> None:
        """Forget the first attempt's wire fields before the request is sent again on a new
        connection (the server closed the reused one before answering): the record describes the
        attempt that got the response, and says why there was another."""
        self.reused = False
        self.pool_wait_start_ns = self.pool_wait_end_ns = 0
        self.dns_start_ns = self.dns_end_ns = 0
        self.connect_start_ns = self.connected_ns = 0
        self.send_start_ns = self.send_end_ns = 0
        self.recv_first_ns = self.recv_last_ns = 0
        self.sent_bytes = self.recv_bytes = self.writes = self.reads = 0
        self.retries += 1
        self.retry_reason = reason

    def http_trace(self) -> HttpTrace | None:
        """The wire trace for the record; None when no byte of the request was written."""
        if not self.send_start_ns:
            return None
        return HttpTrace(
            reused=self.reused, pool_wait_start_ns=self.pool_wait_start_ns,
            pool_wait_end_ns=self.pool_wait_end_ns, dns_start_ns=self.dns_start_ns, dns_end_ns=self.dns_end_ns,
            connect_start_ns=self.connect_start_ns, connected_ns=self.connected_ns,
            send_start_ns=self.send_start_ns, send_end_ns=self.send_end_ns, recv_first_ns=self.recv_first_ns,
            recv_last_ns=self.recv_last_ns, sent_bytes=self.sent_bytes, recv_bytes=self.recv_bytes,
            writes=self.writes, reads=self.reads, retries=self.retries, retry_reason=self.retry_reason)


class Transport(Protocol):
    """Sends one POST and records it into an `Exchange`."""

    async def post(self, ex: Exchange, url: str, body: bytes, headers: Mapping[str, str], *,
                   streaming: bool, lane: str | None = None, keep: bool = True) -> None:
        """Send `body` to `url`, filling `ex` as things happen.

        Promises: `ex.start_ns`/`start_wall_ns` are set right before the request goes out,
        `ex.end_ns` on every exit path (cancellation included). An HTTP status >= 400 is not an
        error here: its status and body are recorded like any other. Transport failures set
        `ex.error` and return. Only cancellation propagates.

        Connection reuse (AIPerf's `connection_reuse`): `lane` None uses the shared pool, a
        string only the connections of that lane (a conversation's, for sticky user
        sessions); `keep` False closes the connection after the response instead of keeping
        it for reuse (`never`, and a sticky session's final turn).
        """
        ...
