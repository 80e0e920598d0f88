"""`--wire-stats`: a TCP relay in front of the app that counts the bytes on the wire.

Granian owns the app's sockets, so the bytes a client really sends and receives (request line,
headers, body, chunked framing) are only visible to something between the two. The relay
listens on the public address, forwards every connection to the app on a loopback port and
adds what it forwards to the shared counters: ``WIRE_BYTES_IN`` (client to server),
``WIRE_BYTES_OUT`` (server to client) and ``WIRE_CONNECTIONS``, for connections whose first
request is an inference request (``POST /v1/...``); health probes and ``/stats`` reads are
relayed but not counted. It runs in a thread of the supervisor with its own event loop and
costs one extra loopback hop per read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any

from aiperf.mock_server.stats import Counter, StatsBoard

_INFERENCE = b"POST /v1/"


class _Client(asyncio.Protocol):
    """The client's side of one relayed connection."""

    def __init__(self, relay: WireRelay) -> None:
        self._relay = relay
        self.transport: asyncio.Transport | None = None
        self._upstream: asyncio.Transport | None = None
        self._pending: list[bytes] = []
        self._head = b""
        self.counted: bool | None = None  # None: not known yet
        self._closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._relay.spawn(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream, _ = await loop.create_connection(lambda: _Upstream(self), "127.0.0.1", self._relay.app_port)
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        if self._closed:
            upstream.close()
            return
        self._upstream = upstream
        for data in self._pending:
            upstream.write(data)
        self._pending.clear()

    def data_received(self, data: bytes) -> None:
        if self.counted is None:
            self._head += data
            if len(self._head) >= len(_INFERENCE) or not _INFERENCE.startswith(self._head):
                self.counted = self._head.startswith(_INFERENCE)
                if self.counted:
                    self._relay.board.add(Counter.WIRE_CONNECTIONS)
                    self._relay.board.add(Counter.WIRE_BYTES_IN, len(self._head))
                self._head = b""
        elif self.counted:
            self._relay.board.add(Counter.WIRE_BYTES_IN, len(data))
        if self._upstream is not None:
            self._upstream.write(data)
        else:
            self._pending.append(data)

    def eof_received(self) -> bool:
        if self._upstream is not None and self._upstream.can_write_eof():
            self._upstream.write_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._upstream is not None:
            self._upstream.close()

    def pause_writing(self) -> None:
        if self._upstream is not None:
            self._upstream.pause_reading()

    def resume_writing(self) -> None:
        if self._upstream is not None:
            self._upstream.resume_reading()


class _Upstream(asyncio.Protocol):
    """The app's side of one relayed connection."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    def data_received(self, data: bytes) -> None:
        client = self._client
        if client.counted:
            client._relay.board.add(Counter.WIRE_BYTES_OUT, len(data))
        if client.transport is not None:
            client.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._client.transport is not None:
            self._client.transport.close()

    def pause_writing(self) -> None:
        if self._client.transport is not None:
            self._client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._client.transport is not None:
            self._client.transport.resume_reading()


class WireRelay:
    """Relays ``host:port`` to ``127.0.0.1:app_port``, counting into ``board`` (a row of its own).

    :meth:`start` returns once it listens (raises ``OSError`` when it cannot bind); :meth:`stop`
    closes every connection and joins the thread.
    """

    def __init__(self, *, host: str, port: int, app_port: int, board: StatsBoard) -> None:
        self.host, self.port, self.app_port, self.board = host, port, app_port, board
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="wire-relay", daemon=True)
        self._ready = threading.Event()
        self._error: OSError | None = None
        self._stopped: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run `coro` on the relay's loop, keeping a reference until it ends."""
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self) -> WireRelay:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout=5)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        try:
            server = await self._loop.create_server(lambda: _Client(self), self.host, self.port,
                                                    reuse_address=True, backlog=4096)
        except OSError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        async with server:
            await self._stopped.wait()
            server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*self._tasks, return_exceptions=True)
