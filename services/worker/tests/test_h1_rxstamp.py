"""`StampedTransport` over a real loopback TCP connection: each read carries the time its data
reached the kernel, not the time the event loop got to it; writes, EOF and close behave like an
asyncio transport's."""

from __future__ import annotations

import asyncio
import itertools
import select
import socket
import sys
import time

import pytest

from aiperf.worker.rxstamp import StampedTransport

pytestmark = pytest.mark.anyio


class _Recorder:
    def __init__(self) -> None:
        self.reads: list[tuple[bytes, int]] = []
        self.eof = False
        self.lost: list[Exception | None] = []

    def connection_made(self, transport: object) -> None:
        pass

    def received(self, data: bytes, stamp_ns: int) -> None:
        self.reads.append((data, stamp_ns))

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


def _pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    client.setblocking(False)
    return client, server


UNTIL_S = 30.0
"""Deadline of `_until`: a condition the loop never meets fails the test, it does not hang it."""


async def _until(condition: object) -> None:
    async with asyncio.timeout(UNTIL_S):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0)


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive timestamps are Linux's")
async def test_a_read_is_stamped_when_its_data_arrived_not_when_the_loop_read_it() -> None:
    client, server = _pair()
    proto = _Recorder()
    StampedTransport(asyncio.get_running_loop(), client, proto)
    for _ in range(1000):  # until the kernel's deferred switch to stamping has happened
        stamp, ready = await _read_late(server, client, proto, b"warm", busy_ns=100_000)
        if stamp <= ready:
            break
    stamp, ready = await _read_late(server, client, proto, b"first token", busy_ns=20_000_000)
    assert proto.reads[-1][0] == b"first token" and stamp <= ready
    server.close()


async def _read_late(server: socket.socket, client: socket.socket, proto: _Recorder, data: bytes, *,
                     busy_ns: int) -> tuple[int, int]:
    """Send `data`, keep the loop busy for `busy_ns` after it is readable; (its stamp, the
    time it was known to be readable)."""
    before = len(proto.reads)
    server.sendall(data)
    select.select([client], [], [], 5.0)  # the data is in the socket: it arrived before `ready`
    ready = time.perf_counter_ns()
    while time.perf_counter_ns() < ready + busy_ns:
        pass  # the loop is busy elsewhere before it reads
    await _until(lambda: len(proto.reads) > before)
    return proto.reads[-1][1], ready


async def test_a_read_is_never_stamped_before_the_read_before_it() -> None:
    # The stamps of a clock that steps back (as a kernel stamp moved onto perf_counter_ns by a
    # process preempted between its two clock reads can): the later read keeps the earlier
    # read's stamp, a zero gap, never a negative one.
    client, server = _pair()
    proto = _Recorder()
    stamps = itertools.chain([1_000, 400, 2_000], itertools.repeat(3_000))  # then the EOF's read
    StampedTransport(asyncio.get_running_loop(), client, proto, clock=lambda: next(stamps))
    for data in (b"one", b"two", b"three"):
        before = len(proto.reads)
        server.sendall(data)
        await _until(lambda: len(proto.reads) > before)  # noqa: B023 (awaited in this iteration)
    assert proto.reads == [(b"one", 1_000), (b"two", 1_000), (b"three", 2_000)]
    server.close()


async def test_writes_then_eof_then_lost_once() -> None:
    client, server = _pair()
    proto = _Recorder()
    transport = StampedTransport(asyncio.get_running_loop(), client, proto)
    big = b"x" * (8 << 20)  # more than the socket buffer takes at once: buffered, then drained
    transport.write(big)
    received = bytearray()
    server.setblocking(False)
    while len(received) < len(big):
        try:
            received += server.recv(1 << 20)
        except BlockingIOError:
            await asyncio.sleep(0)
    assert received == big
    server.close()
    await _until(lambda: proto.lost)
    assert proto.eof and proto.lost == [None] and transport.is_closing()
    transport.abort()
    await asyncio.sleep(0)
    assert proto.lost == [None]


async def test_close_sends_what_is_buffered_first() -> None:
    client, server = _pair()
    proto = _Recorder()
    transport = StampedTransport(asyncio.get_running_loop(), client, proto)
    transport.write(b"y" * (8 << 20))
    transport.close()
    received = bytearray()
    server.setblocking(False)
    while True:
        try:
            part = server.recv(1 << 20)
        except BlockingIOError:
            await asyncio.sleep(0)
            continue
        if not part:
            break
        received += part
    await _until(lambda: proto.lost)
    assert len(received) == 8 << 20 and proto.lost == [None]
    server.close()
