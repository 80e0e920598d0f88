"""Is the client the bottleneck? A verdict from each worker's `ClientLoad` (event-loop lag and
process CPU while it had requests in flight), for the console and `profile_export_aiperf.json`
(`aiperf_extensions.client_saturation`).

A worker is saturated when its loop-lag p99 is over `LAG_P99_LIMIT_MS` (every network read
waited about that long before it was stamped) or its process used more than
`CPU_LIMIT` of one core over a one-second window (a Python event loop runs on one core).
Either way the latencies of that run include the client's own queueing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiperf.messages import ClientLoad

LAG_P99_LIMIT_MS = 10.0
CPU_LIMIT = 0.9


def worker_load(load: ClientLoad) -> dict[str, Any]:
    """The figures of one worker (lags in ms, CPU as a share of one core)."""
    wall = load.busy_wall_ns
    return {"loop_lag_p50_ms": round(load.lag_percentile_ns(50) / 1e6, 3),
            "loop_lag_p99_ms": round(load.lag_percentile_ns(99) / 1e6, 3),
            "loop_lag_max_ms": round(load.lag_max_ns / 1e6, 3),
            "cpu_mean": round(load.busy_cpu_ns / wall, 3) if wall else 0.0,
            "cpu_max_window": round(load.cpu_max_window, 3),
            "busy_s": round(wall / 1e9, 3), "ticks": load.ticks, "tick_ms": load.interval_ns / 1e6}


def client_saturation(loads: Mapping[str, ClientLoad]) -> dict[str, Any]:
    """`{"saturated", "reasons", "thresholds", "workers": {id: figures}}`; `saturated` is None
    when no worker reported (a run too short for one tick, or workers too old to measure)."""
    workers = {wid: worker_load(load) for wid, load in sorted(loads.items())}
    reasons = []
    for wid, w in workers.items():
        if w["loop_lag_p99_ms"] > LAG_P99_LIMIT_MS:
            reasons.append(f"{wid}: event-loop lag p99 {w['loop_lag_p99_ms']:.1f} ms > {LAG_P99_LIMIT_MS:g} ms")
        if w["cpu_max_window"] > CPU_LIMIT:
            reasons.append(f"{wid}: CPU {100 * w['cpu_max_window']:.0f}% of a core > {100 * CPU_LIMIT:.0f}%")
    return {"saturated": bool(reasons) if workers else None, "reasons": reasons,
            "thresholds": {"loop_lag_p99_ms": LAG_P99_LIMIT_MS, "cpu_max_window": CPU_LIMIT},
            "workers": workers}


def saturation_line(verdict: Mapping[str, Any]) -> str:
    """One console line: the verdict with the worst figures ('' when nobody reported)."""
    workers = verdict["workers"]
    if not workers:
        return ""
    lag = max(w["loop_lag_p99_ms"] for w in workers.values())
    cpu = max(w["cpu_max_window"] for w in workers.values())
    figures = f"worst worker: loop lag p99 {lag:.1f} ms, CPU {100 * cpu:.0f}% of a core"
    if not verdict["saturated"]:
        return f"client not saturated ({figures}, {len(workers)} worker(s))"
    more = f" (+{len(verdict['reasons']) - 2} more)" if len(verdict["reasons"]) > 2 else ""
    return ("CLIENT SATURATED: latencies include client-side queueing; add workers or lower the load ("
            + "; ".join(verdict["reasons"][:2]) + more + ")")
