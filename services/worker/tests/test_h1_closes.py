"""`H1Transport` against servers that close keep-alive connections (llama.cpp's cpp-httplib,
nginx, ...): a closed pooled connection is never written to, the server's `Keep-Alive: timeout,
max` is honoured, a request that met a close before any response byte on a reused connection
is sent once more on a new connection (and says so), and any other early close is an error of
a clear type, never an empty success.

The server is a plain blocking socket server in a thread, so a test can stop the client's event
loop (a blocking wait) while the server closes: the close then sits unprocessed in the client's
socket, where only the pre-reuse check can see it."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.worker.exchange import Exchange
from aiperf.worker.h1 import H1Transport

BODY = b"data: {\"x\": 1}\n\ndata: [DONE]\n\n"
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")
FULL = HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)

ANSWER, CLOSE_AFTER, CLOSE_LATE = "answer", "answer then close", "answer then close late"
Action = str | tuple[int, bool]
"""What the server does with one request: `ANSWER` (the whole response, connection kept),
`CLOSE_AFTER` (the whole response, then a FIN without saying so), `CLOSE_LATE` (the same, but
the FIN leaves only when the next request arrives or 0.2 s later: a client that reuses the
connection at once always loses the race), or `(n, reset)`: the first n bytes of the response,
then a reset (True) or a FIN (False)."""


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return False
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(rest) < length:
        rest += conn.recv(65536)
    return True


@dataclass
class _Server:
    """Accepts connections on 127.0.0.1 and serves each request by `plan(conn_index,
    request_index)`; counts what it saw per connection."""

    plan: Callable[[int, int], Action]
    response: bytes = FULL
    requests: list[int] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)

    def serve(self, listener: socket.socket) -> None:
        index = 0
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self.requests.append(0)
            threading.Thread(target=self._connection, args=(conn, index), daemon=True).start()
            index += 1

    def _connection(self, conn: socket.socket, index: int) -> None:
        with conn:
            n = 0
            while _read_request(conn):
                self.requests[index] += 1
                action = self.plan(index, n)
                n += 1
                if action == ANSWER:
                    conn.sendall(self.response)
                    continue
                size, reset = (len(self.response), False) if action in (CLOSE_AFTER, CLOSE_LATE) else action
                conn.sendall(self.response[:size])
                if action == CLOSE_LATE:
                    conn.settimeout(0.2)
                    try:
                        conn.recv(1, socket.MSG_PEEK)
                    except TimeoutError:
                        pass
                if reset:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
        self.closed.set()


@contextmanager
def _serving(plan: Callable[[int, int], Action], response: bytes = FULL) -> Iterator[tuple[_Server, str]]:
    server = _Server(plan, response)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        thread = threading.Thread(target=server.serve, args=(listener,), daemon=True)
        thread.start()
        yield server, f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
        listener.shutdown(socket.SHUT_RDWR)
    thread.join(timeout=5)


async def _post(transport: H1Transport, url: str) -> Exchange:
    ex = Exchange()
    await transport.post(ex, url, b'{"x": 1}', {"Content-Type": "application/json"}, streaming=True)
    return ex


def _ok(ex: Exchange) -> bool:
    return ex.error is None and ex.status == 200 and b"".join(ex.chunks) == BODY


def test_a_connection_the_server_closed_while_idle_is_never_written_to() -> None:
    async def run(server: _Server, url: str) -> list[Exchange]:
        async with H1Transport() as transport:
            first = await _post(transport, url)
            # The loop is blocked while the FIN arrives: the pool has not seen it, only the
            # check before reuse can.
            assert server.closed.wait(5)
            second = await _post(transport, url)
        return [first, second]

    with _serving(lambda conn, n: CLOSE_AFTER if conn == 0 else ANSWER) as (server, url):
        first, second = asyncio.run(run(server, url))
    assert _ok(first) and _ok(second)
    assert not second.reused and second.retries == 0  # a new connection, not a retry
    assert server.requests == [1, 1]  # nothing was written into the closed one


def test_the_servers_keep_alive_timeout_and_max_are_honoured() -> None:
    now = [0.0]

    async def run(url: str, idles: tuple[float, ...]) -> list[bool]:
        async with H1Transport(monotonic=lambda: now[0]) as transport:
            reused = []
            for idle in idles:
                now[0] += idle
                reused.append((await _post(transport, url)).reused)
            return reused

    with _serving(lambda conn, n: ANSWER) as (server, url):  # Keep-Alive: timeout=5
        assert asyncio.run(run(url, (0.0, 3.9, 4.1))) == [False, True, False]  # kept while idle < 4 s
    assert server.requests == [2, 1]
    with _serving(lambda conn, n: ANSWER, FULL.replace(b"max=100", b"max=0")) as (server, url):
        assert asyncio.run(run(url, (0.0, 0.0))) == [False, False]  # max=0: no more requests there
    assert server.requests == [1, 1]


def test_a_server_that_closes_after_every_streamed_response_is_learned() -> None:
    """llama.cpp's server closes each connection right after a streamed response though its
    headers promise keep-alive: after the first time the pool sees it, streamed exchanges no
    longer leave their connection for reuse (no retries), non-streamed ones still do."""
    async def run(url: str) -> tuple[list[Exchange], list[Exchange]]:
        async with H1Transport() as transport:
            streamed = [await _post(transport, url) for _ in range(6)]
            plain = []
            for _ in range(3):
                ex = Exchange()
                await transport.post(ex, url, b"{}", {}, streaming=False)
                plain.append(ex)
            return streamed, plain

    closes = {"n": 0}

    def plan(conn: int, n: int) -> Action:  # streamed requests end with a close, others do not
        closes["n"] += 1
        return CLOSE_LATE if closes["n"] <= 6 else ANSWER

    with _serving(plan) as (server, url):
        streamed, plain = asyncio.run(run(url))
    assert all(ex.error is None for ex in streamed + plain)
    assert sum(ex.retries for ex in streamed) <= 1  # at most one before it was learned
    assert [ex.reused for ex in plain] == [False, True, True]


def test_a_retried_request_starts_its_timing_at_the_second_send() -> None:
    async def run(url: str) -> Exchange:
        async with H1Transport() as transport:
            await _post(transport, url)
            return await _post(transport, url)

    with _serving(lambda conn, n: (0, False) if (conn, n) == (0, 1) else ANSWER) as (server, url):
        ex = asyncio.run(run(url))
    assert _ok(ex) and ex.retries == 1 and not ex.reused
    assert "before any byte of the response" in ex.retry_reason
    trace = ex.http_trace()
    assert trace is not None and trace.retries == 1 and trace.retry_reason == ex.retry_reason
    # The connect of the second attempt comes after the request's start: the start was reset.
    assert 0 < ex.start_ns <= ex.connect_start_ns <= ex.connected_ns <= ex.send_start_ns
    assert server.requests == [2, 1]


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, len(FULL)), reused=st.booleans(), reset=st.booleans())
def test_wherever_the_server_closes_the_outcome_is_exact(cut: int, reused: bool, reset: bool) -> None:
    """The server answers one request normally when `reused` (so the next goes on a pooled
    connection), then cuts the next response after `cut` bytes with a FIN or a reset, and
    answers normally on any new connection."""
    target = (0, 1) if reused else (0, 0)

    def plan(conn: int, n: int) -> Action:
        return (cut, reset) if (conn, n) == target and cut < len(FULL) else ANSWER

    async def run(url: str) -> Exchange:
        async with H1Transport() as transport:
            if reused:
                assert _ok(await _post(transport, url))
            return await _post(transport, url)

    with _serving(plan) as (_, url):
        ex = asyncio.run(run(url))
    kind = ex.error.type if ex.error is not None else None
    if cut == len(FULL):
        assert _ok(ex) and ex.retries == 0
    elif cut == 0:
        if reused:
            assert _ok(ex) and ex.retries == 1
        else:
            assert kind == "ServerDisconnectedError" and ex.retries == 0
    elif not reset:  # a FIN: every byte sent before it arrives
        assert kind == ("ServerDisconnectedError" if cut < len(HEAD) else "ClientPayloadError")
        assert ex.retries == 0
    else:  # a reset may drop bytes still in flight: the client saw some of them, or none
        assert kind in ("ServerDisconnectedError", "ClientPayloadError") or (_ok(ex) and ex.retries == 1)
    assert ex.error is not None or _ok(ex)  # never an empty or partial success


@pytest.mark.parametrize("reset", [False, True])
def test_a_close_before_any_byte_on_a_new_connection_is_a_clear_error(reset: bool) -> None:
    with _serving(lambda conn, n: (0, reset)) as (server, url):
        async def run() -> Exchange:
            async with H1Transport() as transport:
                return await _post(transport, url)
        ex = asyncio.run(run())
    assert ex.error is not None and ex.error.type == "ServerDisconnectedError"
    assert "before any byte of the response" in ex.error.message
    assert ex.status == 0 and ex.chunks == [] and ex.retries == 0
    assert server.requests == [1]  # never sent twice on a fresh connection
