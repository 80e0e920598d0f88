"""Arrival times of open-loop and fixed-schedule phases, and small statistics helpers."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Literal

from aiperf.runtime import UserError

NS_PER_S = 1_000_000_000

RateMode = Literal["constant", "poisson", "gamma"]


RATE_RAMP_STEP_S = 0.1
"""How often a ramped rate is raised (AIPerf's `AIPERF_TIMING_RATE_RAMP_UPDATE_INTERVAL` default)."""


def ramped_rate(rate: float, ramp_s: float, t_s: float, step_s: float = RATE_RAMP_STEP_S) -> float:
    """The rate in force `t_s` seconds into a `ramp_s`-second linear ramp to `rate` (AIPerf's:
    it starts at rate x step / ramp, rather than 0, and is raised every `step_s`)."""
    if t_s >= ramp_s:
        return rate
    start = rate * step_s / ramp_s
    raised = math.floor(t_s / step_s + 1e-9) * step_s
    return start + (rate - start) * raised / ramp_s


def arrival_offsets_ns(*, rate: float, mode: RateMode, smoothness: float = 1.0,
                       rng: random.Random, ramp_s: float | None = None) -> Iterator[int]:
    """Endless arrival offsets (ns from the phase start; the first is 0) of a `rate` per
    second process: `constant` (exactly 1/rate apart, no drift), `poisson` (exponential
    gaps) or `gamma` (gamma gaps of shape `smoothness`, mean 1/rate; shape 1 is poisson,
    larger is smoother). Deterministic for a seeded `rng`.

    With `ramp_s` the rate follows `ramped_rate` for that long (see `_ramped_offsets_ns`; AIPerf
    0.13.0 instead redraws the pending gap at every raise and keeps the sooner, which makes a
    Poisson ramp's early arrivals denser than the ramp says)."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    if ramp_s is not None:
        yield from _ramped_offsets_ns(rate, mode, smoothness, rng, ramp_s)
        return
    if mode == "constant":
        i = 0
        while True:
            yield round(i * NS_PER_S / rate)
            i += 1
    t = 0.0
    while True:
        yield round(t)
        if mode == "poisson":
            gap = rng.expovariate(rate)
        else:
            gap = rng.gammavariate(smoothness, 1.0 / (rate * smoothness))
        t += gap * NS_PER_S


def _ramped_offsets_ns(rate: float, mode: RateMode, smoothness: float, rng: random.Random,
                       ramp_s: float) -> Iterator[int]:
    """The same process with the rate following `ramped_rate`: each gap is a unit-rate variate
    (exponential, gamma of shape `smoothness` and mean 1, or 1) spent at the rate in force, step
    by step, so arrivals follow the ramp at every moment."""
    step = RATE_RAMP_STEP_S
    t = 0.0
    while True:
        yield round(t * NS_PER_S)
        if mode == "constant":
            work = 1.0
        elif mode == "poisson":
            work = rng.expovariate(1.0)
        else:
            work = rng.gammavariate(smoothness, 1.0 / smoothness)
        while True:
            r = ramped_rate(rate, ramp_s, t)
            if t >= ramp_s:
                t += work / r
                break
            boundary = min((math.floor(t / step + 1e-9) + 1) * step, ramp_s)
            if work <= (boundary - t) * r:
                t += work / r
                break
            work -= (boundary - t) * r
            t = boundary


def fixed_offsets_ns(timestamps_ms: Sequence[float | None], *, auto_offset: bool = True,
                     start_ms: float | None = None, end_ms: float | None = None) -> list[tuple[int, int]]:
    """(offset ns from the schedule's zero, conversation index), in send order (stable for equal
    times), of the conversations whose timestamp lies in [`start_ms`, `end_ms`] (either bound
    None: open). The zero is the earliest kept timestamp (`auto_offset`), else `start_ms`, else 0
    (AIPerf 0.13.0's trace window). Raises `UserError` when a conversation has no timestamp, or
    when a window is given and no timestamp lies in it."""
    missing = [i for i, ts in enumerate(timestamps_ms) if ts is None or math.isnan(ts)]
    if missing:
        raise UserError(f"--fixed-schedule: {len(missing)} conversation(s) have no timestamp "
                        f"(first: #{missing[0]}); use a dataset with a timestamp on every entry")
    stamps = [float(ts) for ts in timestamps_ms if ts is not None]
    kept = [i for i, ts in enumerate(stamps) if (start_ms is None or ts >= start_ms) and (end_ms is None or ts <= end_ms)]
    if not kept:
        if stamps and (start_ms is not None or end_ms is not None):
            raise UserError(f"--fixed-schedule-start-offset/--fixed-schedule-end-offset: no trace timestamp lies in "
                            f"[{_ms(start_ms)}, {_ms(end_ms)}] ms (the trace spans {min(stamps):g}..{max(stamps):g} ms)")
        return []
    base = schedule_zero_ms(stamps, auto_offset=auto_offset, start_ms=start_ms, end_ms=end_ms)
    order = sorted(kept, key=lambda i: stamps[i])
    return [(round((stamps[i] - base) * 1_000_000), i) for i in order]


def schedule_zero_ms(timestamps_ms: Sequence[float | None], *, auto_offset: bool = True,
                     start_ms: float | None = None, end_ms: float | None = None) -> float:
    """The trace time (ms) a fixed schedule replays at the phase start: the earliest timestamp
    in the window (`auto_offset`), else `start_ms`, else 0."""
    if not auto_offset:
        return 0.0 if start_ms is None else float(start_ms)
    kept = [float(ts) for ts in timestamps_ms if ts is not None and not math.isnan(ts)
            and (start_ms is None or ts >= start_ms) and (end_ms is None or ts <= end_ms)]
    return min(kept, default=0.0)


def _ms(bound: float | None) -> str:
    return "-" if bound is None else f"{bound:g}"


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile (`q` in 0..100) of already sorted values; 0 for none."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]
