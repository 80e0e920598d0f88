"""Property: however the network splits a response (Content-Length or chunked body, SSE events
cut at any byte, several per read), the `H1Transport` connection gives the same body and SSE
events, each event stamped by the read that delivered its last byte.

The connection protocol is driven directly, one `data_received` per read, with a clock that
returns the read's number: that is the boundary the event loop calls, so no socket timing can
merge or split reads behind the test's back (the real-socket behaviour is in test_h1_transport).
"""

from __future__ import annotations

import asyncio
import bisect

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiperf.endpoints.sse import SseParser
from aiperf.worker.exchange import Exchange
from aiperf.worker.h1 import Connection

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"

_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=40)


def _sse_body(events: list[str]) -> bytes:
    return b"".join(b"data: " + e.encode() + b"\n\n" for e in events)


def _stream(body: bytes, chunk_sizes: list[int] | None) -> tuple[bytes, list[int]]:
    """The response bytes, and for each body byte its position in them."""
    if chunk_sizes is None:
        head = HEAD + b"Content-Length: %d\r\n\r\n" % len(body)
        return head + body, [len(head) + i for i in range(len(body))]
    out, i, sizes = bytearray(HEAD + b"Transfer-Encoding: chunked\r\n\r\n"), 0, iter(chunk_sizes)
    where: list[int] = []
    while i < len(body):
        n = max(1, min(next(sizes, len(body)), len(body) - i))
        out += b"%x\r\n" % n
        where.extend(range(len(out), len(out) + n))
        out += body[i:i + n] + b"\r\n"
        i += n
    out += b"0\r\n\r\n"
    return bytes(out), where


class _Wire(asyncio.Transport):
    """The socket end the connection writes to (nothing is written in these tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def write(self, data: object) -> None: ...

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _exchange(stream: bytes, cuts: list[int], *, streaming: bool = True) -> tuple[Exchange, Connection]:
    loop = asyncio.new_event_loop()
    try:
        read_no = [0]
        conn = Connection(loop, clock=lambda: read_no[0])
        conn.connection_made(_Wire())
        ex = Exchange()
        done = conn.start(ex, b"POST / HTTP/1.1\r\n\r\n", streaming=streaming, cap=1 << 30, idle_s=60.0)
        bounds = [0, *cuts, len(stream)]
        for k in range(len(bounds) - 1):
            read_no[0] = 1000 + k
            conn.data_received(stream[bounds[k]:bounds[k + 1]])
        assert done.done() and done.exception() is None
        assert conn.release()  # complete and keep-alive: back to the pool
        return ex, conn
    finally:
        loop.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_text, min_size=1, max_size=8), chunked=st.booleans(),
       chunk_sizes=st.lists(st.integers(1, 64), max_size=20), data=st.data())
def test_any_split_gives_the_same_events_stamped_by_the_completing_read(
        events: list[str], chunked: bool, chunk_sizes: list[int], data: st.DataObject) -> None:
    body = _sse_body(events)
    stream, where = _stream(body, chunk_sizes if chunked else None)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(stream) - 1), max_size=30))))
    ex, _ = _exchange(stream, cuts)

    assert b"".join(ex.chunks) == body
    assert ex.chunk_ns == sorted(set(ex.chunk_ns))  # one chunk per read that carried body bytes
    assert ex.status == 200 and ex.reads == len(cuts) + 1 and ex.recv_bytes == len(stream)
    parser = SseParser()
    got = [e for chunk, ts in zip(ex.chunks, ex.chunk_ns, strict=True) for e in parser.feed(chunk, ts)]
    assert [e.data for e in got] == events
    # the read holding an event's last byte (its blank line's LF) is the one that stamps it
    ends = [len(_sse_body(events[:i + 1])) - 1 for i in range(len(events))]
    expected = [1000 + bisect.bisect_right(cuts, where[end]) for end in ends]
    assert [e.ts_ns for e in got] == expected
    # the headers are stamped by the read that completed them
    header_end = stream.index(b"\r\n\r\n") + 3
    assert ex.headers_ns == 1000 + bisect.bisect_right(cuts, header_end)


@settings(max_examples=50, deadline=None)
@given(body=st.binary(max_size=300), chunked=st.booleans(), data=st.data())
def test_a_non_streaming_body_is_one_chunk_stamped_at_its_end(body: bytes, chunked: bool,
                                                              data: st.DataObject) -> None:
    stream, _ = _stream(body, [7, 3, 50] if chunked else None)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(stream) - 1), max_size=10))))
    ex, _ = _exchange(stream, cuts, streaming=False)
    assert ex.chunks == [body] and ex.chunk_ns == [1000 + len(cuts)]
