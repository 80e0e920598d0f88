"""Time-weighted statistics of a step function given as pieces (a value and how long it held).

`weighted_stats(values, dt, total)` gives what AIPerf exports for a sweep metric over a window
of `total` ns: ``avg = sum(v * dt) / total``, ``std`` likewise, ``min``/``max`` over the pieces,
and ``pXX`` the smallest value ``v`` such that the pieces at or below ``v`` last at least XX% of
`total`. It works in place and in blocks of `BLOCK` elements, so a long run's curves (one piece
per chunk) need no sort and no array of their size beyond the pieces themselves: the
percentiles come from a radix select on the values' bits (six histogram passes), or, for
windows past 2**53 ns where float durations would no longer be exact, from an argsort. The
floats are those of AIPerf 0.13's numpy formulas, ``np.sum(v * dt) / total`` and
``np.sqrt(np.sum(dt * (v - avg) ** 2) / total)``: numpy's pairwise sums, evaluated block by block
(`aiperf.metrics.exact.pairwise_sum`), so no product array of the pieces' size is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from aiperf.metrics.exact import pairwise_sum

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
"""The percentiles of a time-weighted curve AIPerf exports."""

BLOCK = 1 << 16
"""Elements per step of the blockwise loops: their temporaries stay small whatever the run."""


@dataclass(frozen=True, slots=True)
class TimeWeightedStats:
    """Time-weighted statistics of one curve (the stats AIPerf exports for sweep metrics)."""

    avg: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    std: float

    @classmethod
    def zero(cls) -> TimeWeightedStats:
        """What AIPerf reports for a curve with nothing in the window."""
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
_TOP = np.uint64(1 << 63)
_ROUNDS = ((53, 11), (42, 11), (31, 11), (20, 11), (9, 11), (0, 9))
"""(shift, width) of the key digits the percentile search histograms, most significant first:
small histograms (2,048 bins), six passes over the values."""


def _keys(values: FloatArray) -> npt.NDArray[np.uint64]:
    """Unsigned integers in the order of the floats `values` (no NaN; -0.0 counts as 0.0)."""
    bits = (values + 0.0).view(np.int64)
    return (bits ^ ((bits >> 63) & _MAGNITUDE)).view(np.uint64) ^ _TOP


def _float_of_key(key: int) -> float:
    k = (np.array([key], np.uint64) ^ _TOP).view(np.int64)
    return float((k ^ ((k >> 63) & _MAGNITUDE)).view(np.float64)[0])


def _weighted_percentiles(values: FloatArray, dt: FloatArray, targets: list[int]) -> list[float]:
    """For each target, the smallest value whose pieces at or below it last >= target ns: a
    radix select on the values' bits (no sort, no array of the pieces' size).
    `dt` holds whole numbers whose sum is under 2**53, so every float sum here is exact."""
    prefix, below = [0] * len(targets), [0] * len(targets)
    for shift, width in _ROUNDS:
        hist = {p: np.zeros(1 << width) for p in prefix}
        for a in range(0, values.size, BLOCK):
            keys, weights = _keys(values[a:a + BLOCK]), dt[a:a + BLOCK]
            digit = ((keys >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.intp)
            if shift + width == 64:
                hist[0] += np.bincount(digit, weights=weights, minlength=1 << width)
                continue
            high = keys >> np.uint64(shift + width)
            for p, h in hist.items():
                m = high == np.uint64(p)
                h += np.bincount(digit[m], weights=weights[m], minlength=1 << width)
        held = {p: np.cumsum(h) for p, h in hist.items()}
        for i, target in enumerate(targets):
            cum = held[prefix[i]]
            d = int(np.searchsorted(cum, target - below[i], side="left"))
            below[i] += int(cum[d - 1]) if d else 0
            prefix[i] = (prefix[i] << width) | d
    return [_float_of_key(key) for key in prefix]


def _sorted_percentiles(values: FloatArray, dt: IntArray, targets: list[int]) -> list[float]:
    """As `_weighted_percentiles`, for durations that need int64 (windows past 2**53 ns)."""
    order = np.argsort(values)  # ties in any order: the percentiles are the same values
    found: list[float] = []
    carry = 0
    for a in range(0, order.size, BLOCK):  # the time held at or below each value, in blocks
        idx = order[a:a + BLOCK]
        held = dt[idx].astype(np.int64)
        np.cumsum(held, out=held)
        held += carry
        while len(found) < len(targets) and held[-1] >= targets[len(found)]:
            found.append(float(values[idx[int(np.searchsorted(held, targets[len(found)], side="left"))]]))
        carry = int(held[-1])
    return found


def weighted_stats(values: FloatArray, dt: FloatArray | IntArray, total: int) -> TimeWeightedStats:
    """Stats of pieces (`values`, durations `dt`) over `total` ns; consumes `values`. Same floats
    as AIPerf's formulas (module doc)."""
    if total <= 0 or values.size == 0:
        return TimeWeightedStats.zero()
    targets = [-(-p * total // 100) for p in PERCENTILES]  # held * 100 >= p * total
    if dt.dtype == np.float64:
        p50, p90, p95, p99 = _weighted_percentiles(values, cast(FloatArray, dt), targets)
        weights = dt
    else:
        p50, p90, p95, p99 = _sorted_percentiles(values, cast(IntArray, dt), targets)
        weights = dt.astype(np.float64)
    low, high = float(values.min()), float(values.max())
    n = values.size
    avg = float(pairwise_sum((values[a:a + BLOCK] * weights[a:a + BLOCK] for a in range(0, n, BLOCK)), n) / total)
    spread = np.subtract(values, avg, out=values)
    np.square(spread, out=spread)
    std = math.sqrt(pairwise_sum((weights[a:a + BLOCK] * spread[a:a + BLOCK] for a in range(0, n, BLOCK)), n) / total)
    return TimeWeightedStats(avg=avg, min=low, max=high, p50=p50, p90=p90, p95=p95, p99=p99, std=std)


__all__ = ["BLOCK", "PERCENTILES", "TimeWeightedStats", "weighted_stats"]
