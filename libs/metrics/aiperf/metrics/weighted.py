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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

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


Pieces = Callable[[], Iterable[tuple[FloatArray, FloatArray | IntArray]]]
"""Returns a fresh iterable over a curve's pieces, in blocks of (values, durations), in order
(called once per pass over them)."""


def _weighted_percentiles(pieces: Pieces, targets: list[int]) -> list[float]:
    """For each target, the smallest value whose pieces at or below it last >= target ns: a
    radix select on the values' bits (no sort, no array of the pieces' size). The durations
    hold whole numbers whose sum is under 2**53, so every float sum here is exact."""
    prefix, below = [0] * len(targets), [0] * len(targets)
    for shift, width in _ROUNDS:
        hist = {p: np.zeros(1 << width) for p in prefix}
        for values, weights in pieces():
            keys = _keys(values)
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
    """Stats of pieces (`values`, durations `dt`) over `total` ns: `weighted_stats_of` of the
    arrays, `BLOCK` pieces at a time."""
    def pieces() -> Iterator[tuple[FloatArray, FloatArray | IntArray]]:
        for a in range(0, values.size, BLOCK):
            yield values[a:a + BLOCK], dt[a:a + BLOCK]

    return weighted_stats_of(pieces, total)


def weighted_stats_of(pieces: Pieces, total: int) -> TimeWeightedStats:
    """Stats of the pieces that `pieces` yields over `total` ns, bit for bit AIPerf's formulas
    on the whole arrays (module doc), from nine passes over the blocks (a pass for the count
    and the extremes, one per sum, six for the percentiles), none holding more than a block;
    durations in int64 (windows past 2**53 ns) are gathered whole for an argsort instead."""
    n, low, high, whole_float = 0, math.inf, -math.inf, True
    for values, dt in pieces():
        if values.size:
            n += values.size
            low, high = min(low, float(values.min())), max(high, float(values.max()))
            whole_float = whole_float and dt.dtype == np.float64
    if total <= 0 or n == 0:
        return TimeWeightedStats.zero()
    targets = [-(-p * total // 100) for p in PERCENTILES]  # held * 100 >= p * total
    if whole_float:
        p50, p90, p95, p99 = _weighted_percentiles(pieces, targets)
    else:
        parts = list(pieces())
        p50, p90, p95, p99 = _sorted_percentiles(np.concatenate([v for v, _ in parts]),
                                                 np.concatenate([d for _, d in parts]).astype(np.int64), targets)
        del parts

    def weighted() -> Iterator[tuple[FloatArray, FloatArray]]:
        for values, dt in pieces():
            yield values, np.asarray(dt, dtype=np.float64)  # no copy when already float64

    avg = float(pairwise_sum((v * w for v, w in weighted()), n) / total)
    std = math.sqrt(pairwise_sum((w * (v - avg) ** 2 for v, w in weighted()), n) / total)
    return TimeWeightedStats(avg=avg, min=low, max=high, p50=p50, p90=p90, p95=p95, p99=p99, std=std)


__all__ = ["BLOCK", "PERCENTILES", "Pieces", "TimeWeightedStats", "weighted_stats", "weighted_stats_of"]
