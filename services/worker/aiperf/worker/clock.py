"""Clock helpers of the worker: precise waits on `perf_counter_ns` and the clock-offset estimate
against the timing-manager's clock."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

import anyio

_perf_ns = time.perf_counter_ns

SPIN_NS = 1_000_000
"""How long before a deadline `wait_until` stops sleeping and starts yielding in a loop.

Event-loop timers (uvloop/libuv) have millisecond granularity; spinning on `anyio.sleep(0)`
for the last stretch keeps other tasks running while hitting the deadline within a few
microseconds (measured p50 3 us). The price is up to `SPIN_NS` of busy yielding per wait
(measured ~0.7 CPU-ms per scheduled credit on an idle loop; 1.5 ms: ~1.0)."""


async def wait_until(target_ns: int, *, spin_ns: int = SPIN_NS) -> None:
    """Return at the first scheduling point at or after `perf_counter_ns() == target_ns`.

    Never returns early; returns at once (without a checkpoint) when the time has passed.
    Cancellable. Costs at most `spin_ns` of busy yielding per call.
    """
    remaining = target_ns - _perf_ns()
    if remaining > spin_ns:
        await anyio.sleep((remaining - spin_ns) / 1e9)
    while _perf_ns() < target_ns:
        await anyio.sleep(0)


class ClockSample(NamedTuple):
    """One ping/pong: local send time, the remote clock at receipt, local receive time."""

    sent_ns: int
    remote_ns: int
    received_ns: int


def estimate_offset(samples: Sequence[ClockSample]) -> int:
    """`offset` such that local = remote + offset, from ping/pong samples.

    Min filter: the one-way delta remote - sent is transit - offset, smallest for the fastest
    ping; the fastest transit is taken as half the smallest round trip. Raises `ValueError`
    on no samples.
    """
    if not samples:
        raise ValueError("no clock samples")
    min_rtt = min(s.received_ns - s.sent_ns for s in samples)
    min_one_way = min(s.remote_ns - s.sent_ns for s in samples)
    return max(min_rtt, 0) // 2 - min_one_way


TRACK_WINDOW = 20
"""Credits whose one-way delay the running offset estimate is the minimum of."""


class OffsetTracker:
    """The clock offset kept current during a run, from the credits themselves.

    A credit stamped `issued_at_ns` on the timing-manager's clock and received at `received_ns`
    on ours took `received - issued = transit + offset`. Over the last `window` credits the
    smallest such delay has the least queueing in it; its transit is taken as half the smallest
    round trip of the start-up pings (`min_rtt_ns`). So a clock that drifts or steps (an NTP
    correction on one node) moves the estimate within `window` credits, and one slow credit
    never does. Before any credit the start-up estimate stands.
    """

    __slots__ = ("offset_ns", "_half_rtt_ns", "_delays", "_window")

    def __init__(self, offset_ns: int, min_rtt_ns: int, *, window: int = TRACK_WINDOW) -> None:
        self.offset_ns, self._half_rtt_ns, self._window = offset_ns, max(min_rtt_ns, 0) // 2, window
        self._delays: list[int] = []

    def observe(self, issued_at_ns: int, received_ns: int) -> int:
        """Take one credit's stamps; returns the offset now estimated (local = remote + offset)."""
        delays = self._delays
        delays.append(received_ns - issued_at_ns)
        if len(delays) > self._window:
            del delays[0]
        self.offset_ns = min(delays) - self._half_rtt_ns
        return self.offset_ns
