"""Arrival times of open-loop and fixed-schedule phases, and small statistics helpers."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Literal

from aiperf.runtime import UserError

NS_PER_S = 1_000_000_000

RateMode = Literal["constant", "poisson", "gamma"]


def arrival_offsets_ns(*, rate: float, mode: RateMode, smoothness: float = 1.0,
                       rng: random.Random) -> Iterator[int]:
    """Endless arrival offsets (ns from the phase start; the first is 0) of a `rate` per
    second process: `constant` (exactly 1/rate apart, no drift), `poisson` (exponential
    gaps) or `gamma` (gamma gaps of shape `smoothness`, mean 1/rate; shape 1 is poisson,
    larger is smoother). Deterministic for a seeded `rng`."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
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


def fixed_offsets_ns(timestamps_ms: Sequence[float | None]) -> list[tuple[int, int]]:
    """(offset ns from the earliest timestamp, conversation index), in send order (stable
    for equal times). Raises `UserError` when a conversation has no timestamp."""
    missing = [i for i, ts in enumerate(timestamps_ms) if ts is None or math.isnan(ts)]
    if missing:
        raise UserError(f"--fixed-schedule: {len(missing)} conversation(s) have no timestamp "
                        f"(first: #{missing[0]}); use a dataset with a timestamp on every entry")
    stamps = [float(ts) for ts in timestamps_ms if ts is not None]
    if not stamps:
        return []
    base = min(stamps)
    order = sorted(range(len(stamps)), key=lambda i: stamps[i])
    return [(round((stamps[i] - base) * 1_000_000), i) for i in order]


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile (`q` in 0..100) of already sorted values; 0 for none."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]
