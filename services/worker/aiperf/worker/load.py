"""The worker's own load: how late a periodic timer fires (event-loop lag) and how much CPU
the process uses, counted while requests are in flight. A late timer means every callback of
the loop, network reads included, waited that long: the latencies measured then include the
client's own queueing."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import anyio

from aiperf.messages import LAG_BUCKETS, ClientLoad, lag_bucket

TICK_S = 0.01
"""Timer period of the lag probe (100 per second: a few microseconds of CPU per second)."""
WINDOW_NS = 1_000_000_000
"""Busy time over which one CPU share is taken for `ClientLoad.cpu_max_window`."""
SNAPSHOT_EVERY_NS = 250_000_000
"""How often a record carries a snapshot, at most (and when the last request of a burst ends)."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class LoadMonitor:
    """Measures this process's event-loop lag and CPU while `busy()` says requests are in
    flight. `run` ticks until cancelled; `snapshot_due` hands out a cumulative `ClientLoad`
    when one is due (every `SNAPSHOT_EVERY_NS`, or at once when the caller says the burst is
    ending and the last one is older than a tick)."""

    def __init__(self, *, busy: Callable[[], bool], tick_s: float = TICK_S,
                 clock: Callable[[], int] = time.perf_counter_ns,
                 cpu: Callable[[], int] = time.process_time_ns) -> None:
        self._busy, self._tick_s, self._clock, self._cpu = busy, tick_s, clock, cpu
        self._tick_ns = round(tick_s * 1e9)
        self._counts = [0] * LAG_BUCKETS
        self._ticks = self._lag_max = self._busy_wall = self._busy_cpu = 0
        self._win_wall = self._win_cpu = 0
        self._cpu_max = 0.0
        self._cores = _cores()
        self._last_snapshot = 0

    async def run(self) -> None:
        """Tick every `tick_s` until cancelled."""
        clock, cpu, tick_ns, sleep = self._clock, self._cpu, self._tick_ns, anyio.sleep
        t_prev, c_prev = clock(), cpu()
        while True:
            await sleep(self._tick_s)
            t, c = clock(), cpu()
            if self._busy():
                self.observe(max(0, t - t_prev - tick_ns), t - t_prev, c - c_prev)
            t_prev, c_prev = t, c

    def observe(self, lag_ns: int, wall_ns: int, cpu_ns: int) -> None:
        """Count one busy tick: fired `lag_ns` late, `wall_ns` after the previous, `cpu_ns` of
        process CPU between them."""
        self._counts[lag_bucket(lag_ns)] += 1
        self._ticks += 1
        if lag_ns > self._lag_max:
            self._lag_max = lag_ns
        self._busy_wall += wall_ns
        self._busy_cpu += cpu_ns
        self._win_wall += wall_ns
        self._win_cpu += cpu_ns
        if self._win_wall >= WINDOW_NS:
            self._cpu_max = max(self._cpu_max, self._win_cpu / self._win_wall)
            self._win_wall = self._win_cpu = 0

    def snapshot(self) -> ClientLoad:
        """Everything counted so far."""
        cpu_max = self._cpu_max
        if self._win_wall and not cpu_max:  # less busy time than one window: the share so far
            cpu_max = self._win_cpu / self._win_wall
        return ClientLoad(interval_ns=self._tick_ns, ticks=self._ticks, lag_counts=list(self._counts),
                          lag_max_ns=self._lag_max, busy_wall_ns=self._busy_wall, busy_cpu_ns=self._busy_cpu,
                          cpu_max_window=cpu_max, window_ns=WINDOW_NS, cores=self._cores)

    def snapshot_due(self, now_ns: int, *, ending: bool) -> ClientLoad | None:
        """A snapshot when one is due at `now_ns` (see the class doc), else None."""
        since = now_ns - self._last_snapshot
        if since >= SNAPSHOT_EVERY_NS or (ending and since >= self._tick_ns):
            self._last_snapshot = now_ns
            return self.snapshot()
        return None
