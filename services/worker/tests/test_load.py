"""The worker's load probe on a real event loop: a blocked loop shows as lag, idle time (no
request in flight) is not counted, and snapshots come at most every quarter second."""

from __future__ import annotations

import time

import anyio
import pytest

from aiperf.worker.load import SNAPSHOT_EVERY_NS, LoadMonitor

pytestmark = pytest.mark.anyio


async def test_a_blocked_loop_is_measured_only_while_busy() -> None:
    busy, cpu_ns = [False], [0]
    monitor = LoadMonitor(busy=lambda: busy[0], tick_s=0.005, cpu=lambda: cpu_ns[0])
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.run)
        await anyio.sleep(0.03)
        assert monitor.snapshot().ticks == 0  # nothing in flight: nothing counted
        busy[0] = True
        await anyio.sleep(0.02)
        time.sleep(0.06)  # the loop is stuck: the next tick fires >= 55 ms late
        cpu_ns[0] += 40_000_000  # and the process says it spent 40 ms of CPU meanwhile
        await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    load = monitor.snapshot()
    assert load.ticks >= 2 and load.lag_max_ns >= 55_000_000
    assert load.lag_percentile_ns(100) >= 55_000_000
    assert load.busy_cpu_ns == 40_000_000 and load.busy_wall_ns >= 60_000_000
    assert load.cpu_max_window == load.busy_cpu_ns / load.busy_wall_ns  # shorter than one window


def test_snapshots_are_rate_limited() -> None:
    monitor = LoadMonitor(busy=lambda: True, tick_s=0.01)
    t = 10 * SNAPSHOT_EVERY_NS
    assert monitor.snapshot_due(t, ending=False) is not None
    assert monitor.snapshot_due(t + 1, ending=False) is None
    assert monitor.snapshot_due(t + 1, ending=True) is None  # within one tick of the last
    assert monitor.snapshot_due(t + 20_000_000, ending=True) is not None
    assert monitor.snapshot_due(t + 20_000_000 + SNAPSHOT_EVERY_NS, ending=False) is not None
