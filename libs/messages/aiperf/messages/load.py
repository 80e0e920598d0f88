"""How loaded a worker's own process is: event-loop lag and CPU, while it has requests in
flight. Travels on the records path (a `RequestRecord` carries the worker's cumulative
`ClientLoad` now and then; the record-processor copies it onto the `MetricRecord`), so the
records-manager can say when the client, not the server, was the bottleneck."""

from __future__ import annotations

import math

import msgspec

LAG_BUCKETS = 96
"""Lag histogram: bucket 0 holds lags under 16 us; bucket i >= 1 lags in [2^((i-1)/4),
2^(i/4)) x 16 us (four buckets per doubling, so a percentile read from it is at most 19% high);
the last bucket holds everything from about 2.3 minutes on."""

_BASE_NS = 16_000


def lag_bucket(lag_ns: int) -> int:
    """The histogram bucket of a lag of `lag_ns` nanoseconds."""
    if lag_ns < _BASE_NS:
        return 0
    return min(LAG_BUCKETS - 1, 1 + int(4 * math.log2(lag_ns / _BASE_NS)))


def lag_bucket_upper_ns(index: int) -> float:
    """The upper bound of bucket `index` (what a percentile falling in it is reported as)."""
    return float(_BASE_NS * 2 ** (index / 4)) if index else float(_BASE_NS)


class ClientLoad(msgspec.Struct, frozen=True, kw_only=True):
    """One worker process's load since it started, counted only while it had requests in flight.

    `lag_counts[i]`: timer ticks (every `interval_ns`) that fired late by a lag in bucket `i`
    (`lag_bucket`); `lag_max_ns` the largest lateness. `busy_wall_ns`/`busy_cpu_ns`: wall and
    process CPU time over those ticks (CPU / wall = share of one core); `cpu_max_window` the
    highest such share over any window of `window_ns` busy time. `cores` is how many cores the
    process may run on. Cumulative: a later snapshot of a worker replaces an earlier one
    (compare `ticks`).
    """

    interval_ns: int
    ticks: int = 0
    lag_counts: list[int] = []
    lag_max_ns: int = 0
    busy_wall_ns: int = 0
    busy_cpu_ns: int = 0
    cpu_max_window: float = 0.0
    window_ns: int = 1_000_000_000
    cores: int = 1

    def lag_percentile_ns(self, q: float) -> float:
        """The `q`-th percentile (0..100) of the lag, as its bucket's upper bound (0: no ticks)."""
        total = sum(self.lag_counts)
        if not total:
            return 0.0
        rank, seen = q / 100 * total, 0
        for i, n in enumerate(self.lag_counts):
            seen += n
            if seen >= rank and n:
                return min(lag_bucket_upper_ns(i), float(self.lag_max_ns))
        return float(self.lag_max_ns)
