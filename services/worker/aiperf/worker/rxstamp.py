"""A plain-TCP asyncio transport whose every read carries the kernel's receive time.

An event loop's own transport reads with `recv` and calls `data_received` when the loop gets to
it: a stamp taken there includes the loop's wake-up and whatever ran before the callback (tens
to hundreds of microseconds under load). Here the socket asks the kernel for software receive
timestamps (`SO_TIMESTAMPING` with `SOF_TIMESTAMPING_RX_SOFTWARE`, Linux), each read is a
`recvmsg` whose ancillary data holds the time the last packet of that read reached the network
stack, and the protocol's `received(data, stamp)` gets that time on the `perf_counter_ns` clock.
Where the kernel gives no stamp (another OS, a refused option) the stamp is the clock read right
after `recvmsg`, before anything else.

A connection's stamps never go backwards: a read is stamped no earlier than the read before it
(its data cannot have arrived earlier). The kernel's stamp is a wall-clock time moved onto the
`perf_counter_ns` clock by the two clocks read one after the other; a process preempted between
those two reads (or a read the kernel did not stamp, stamped late by the clock) would otherwise
give a later read an earlier stamp: a negative gap between chunks (seen once in 20,000 requests
on a saturated 2-core host, -1.4 ms), which no clock can measure and which costs the summary
the float64 storage of every gap of the run. Such a read gets its predecessor's stamp.

Contract (the subset of `asyncio.Transport` `aiperf.worker.h1.Connection` uses): `write`
(buffered when the socket is full), `close` (after the buffer drains), `abort`, `is_closing`,
`get_extra_info("socket")`; the protocol gets `connection_made` at construction,
`received(data, stamp_ns)` per read, `eof_received` then `connection_lost(None)` on EOF, and
`connection_lost(exc)` once, from the loop, after a close, an abort or a socket error.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
"""Linux's SO_TIMESTAMPING (SO_TIMESTAMPING_OLD: timespecs of the platform's `long`)."""
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
_TIMESPEC = struct.Struct("@ll")
_ANCILLARY = socket.CMSG_SPACE(3 * _TIMESPEC.size)
READ_SIZE = 256 * 1024
MAX_AGE_NS = 1_000_000_000
"""A kernel stamp more than this before the read is not trusted (a wall-clock step)."""

_perf_ns = time.perf_counter_ns
_wall_ns = time.time_ns


class StampedProtocol(Protocol):
    def connection_made(self, transport: Any) -> None: ...
    def received(self, data: bytes, stamp_ns: int) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


_keeper: list[socket.socket] = []


def enable_rx_timestamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what `sock` receives; False where it cannot.

    The kernel turns receive stamping on for the whole stack when the first socket asks and off
    when the last one closes, each time through deferred work, so packets right after a switch
    may come unstamped (their reads then carry the clock read after `recvmsg`). The first call
    keeps one idle UDP socket asking for the life of the process, so connections that come and
    go never switch it off."""
    if sys.platform != "linux":
        return False
    flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
    try:
        if not _keeper:
            keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
            _keeper.append(keeper)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
    except OSError:
        return False
    return True


class StampedTransport:
    """Owns a connected non-blocking TCP socket inside `loop` (see the module doc)."""

    __slots__ = ("_loop", "_sock", "_fd", "_protocol", "_clock", "_kernel", "_buffer", "_closing", "_lost", "_last")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: StampedProtocol,
                 clock: Callable[[], int] = _perf_ns) -> None:
        self._loop, self._sock, self._fd, self._protocol, self._clock = loop, sock, sock.fileno(), protocol, clock
        self._kernel = clock is _perf_ns and enable_rx_timestamps(sock)
        self._buffer = bytearray()
        self._closing = self._lost = False
        self._last = 0  # the stamp of the latest read (module doc: never backwards)
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        now = self._clock()
        wall = _wall_ns() if self._kernel else 0
        if not data:
            self._stop_reading()
            self._protocol.eof_received()
            self.close()
            return
        if self._kernel and ancillary:
            level, kind, raw = ancillary[0]
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(raw) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(raw)
                age = wall - (sec * 1_000_000_000 + nsec)
                if 0 <= age < MAX_AGE_NS:
                    now -= age
        if now < self._last:
            now = self._last
        self._last = now
        self._protocol.received(data, now)

    def write(self, data: bytes) -> None:
        if self._closing or self._lost:
            return
        if not self._buffer:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lose(exc)
                return
            if sent == len(data):
                return
            data = data[sent:]
            self._loop.add_writer(self._fd, self._on_writable)
        self._buffer += data

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        del self._buffer[:sent]
        if not self._buffer:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._lose(None)

    def is_closing(self) -> bool:
        return self._closing or self._lost

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._sock if name == "socket" else default

    def close(self) -> None:
        """Close once what is written has gone out."""
        if self._closing or self._lost:
            return
        self._closing = True
        self._stop_reading()
        if not self._buffer:
            self._lose(None)

    def abort(self) -> None:
        """Close now, dropping anything unsent."""
        self._lose(None)

    def _stop_reading(self) -> None:
        if not self._lost:
            self._loop.remove_reader(self._fd)

    def _lose(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = self._closing = True
        self._loop.remove_reader(self._fd)
        if self._buffer:
            self._loop.remove_writer(self._fd)
            self._buffer.clear()
        self._sock.close()
        self._loop.call_soon(self._protocol.connection_lost, exc)
