"""Per-phase statistics of scraped series, in AIPerf 0.13's server-metrics vocabulary.

- counters: `total` is the increase over the window, reset-aware (a value below its predecessor
  means the server restarted from zero, so the step counts the new value whole, as Prometheus'
  `increase()` does); `rate` is `total` over the window's seconds; `rate_avg/min/max/std` describe
  the per-interval rates between consecutive scrapes.
- gauges (and untyped families): `avg, min, max, std` (sample std, 0 below two samples) and the
  exact percentiles `p1 ... p99` of the scraped values (linear interpolation between ranks).
- histograms: the reset-aware increase of every cumulative bucket, `count`, `sum`, `avg`,
  `count_rate`, `sum_rate`, and `p*_estimate` derived from the buckets by linear interpolation
  within the bucket holding the rank (Prometheus' `histogram_quantile`: the lowest bucket starts
  at 0, a rank in `+Inf` answers the highest finite bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from aiperf.servermetrics.parse import HistogramValue

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def counter_increase(values: Sequence[float]) -> float:
    """How much a counter grew across `values` (in scrape order), counting through resets."""
    return sum(cur - prev if cur >= prev else cur for prev, cur in pairwise(values))


def counter_stats(values: Sequence[float], times_ns: Sequence[int]) -> dict[str, float]:
    """`total` and `rate` always; the per-interval `rate_*` when the counter moved."""
    total = counter_increase(values)
    seconds = (times_ns[-1] - times_ns[0]) / 1e9 if len(times_ns) > 1 else 0.0
    out = {"total": total, "rate": total / seconds if seconds > 0 else 0.0}
    rates = [(cur - prev if cur >= prev else cur) / ((t1 - t0) / 1e9)
             for (prev, cur), (t0, t1) in zip(pairwise(values), pairwise(times_ns), strict=True) if t1 > t0]
    if total and rates:
        out |= {"rate_avg": sum(rates) / len(rates), "rate_min": min(rates), "rate_max": max(rates),
                "rate_std": _std(rates)}
    return out


def percentile(ordered: Sequence[float], p: float) -> float:
    """The `p`-th percentile (0..100) of sorted `ordered` by linear interpolation between ranks."""
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def gauge_stats(values: Sequence[float]) -> dict[str, float]:
    """`avg, min, max, std, p1..p99` of `values` (at least one)."""
    ordered = sorted(values)
    out = {"avg": sum(ordered) / len(ordered), "min": ordered[0], "max": ordered[-1], "std": _std(ordered)}
    return out | {f"p{p}": percentile(ordered, p) for p in PERCENTILES}


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def histogram_increase(values: Sequence[HistogramValue]) -> HistogramValue:
    """The observations made across `values` (in scrape order), counting through resets: a step
    whose count, sum or any bucket went down (or whose bounds changed) counts the later value
    whole. One value: nothing observed (zero buckets on its bounds)."""
    first = values[0]
    bounds = [le for le, _ in first.buckets]
    acc = dict.fromkeys(bounds, 0.0)
    count = total = 0.0
    for prev, cur in pairwise(values):
        same = [le for le, _ in cur.buckets] == [le for le, _ in prev.buckets]
        reset = (not same or cur.count < prev.count or cur.sum < prev.sum
                 or any(c < p for (_, c), (_, p) in zip(cur.buckets, prev.buckets, strict=False)))
        for (le, c), (_, p) in zip(cur.buckets, prev.buckets if not reset else cur.buckets, strict=True):
            acc[le] = acc.get(le, 0.0) + (c if reset else c - p)
        count += cur.count if reset else cur.count - prev.count
        total += cur.sum if reset else cur.sum - prev.sum
    return HistogramValue(tuple(sorted(acc.items())), count, total)


def bucket_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """The `q`-quantile (0 < q <= 1) of cumulative `buckets` (ascending, last `+Inf`); None
    when they hold no observation."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(le):
                return lower
            if lower > le:  # a first bucket with a negative bound: nothing to interpolate from
                return le
            in_bucket = cumulative - below
            return le if in_bucket <= 0 else lower + (le - lower) * (rank - below) / in_bucket
        lower, below = le, cumulative
    return lower


def histogram_stats(delta: HistogramValue, seconds: float) -> tuple[dict[str, float], dict[str, float]]:
    """The stats of increase `delta` over `seconds`, and its buckets keyed by bound (`+Inf`):
    only `count` when nothing was observed."""
    buckets = {_le(le): count for le, count in delta.buckets}
    if delta.count <= 0:
        return {"count": 0}, buckets
    stats: dict[str, float] = {
        "count": delta.count, "sum": delta.sum, "avg": delta.sum / delta.count,
        "count_rate": delta.count / seconds if seconds > 0 else 0.0,
        "sum_rate": delta.sum / seconds if seconds > 0 else 0.0}
    for p in PERCENTILES:
        value = bucket_quantile(delta.buckets, p / 100)
        if value is not None:
            stats[f"p{p}_estimate"] = value
    return stats, buckets


def _le(bound: float) -> str:
    if math.isinf(bound):
        return "+Inf"
    return repr(int(bound)) if bound.is_integer() else repr(bound)


def scrub_non_finite(value: Any) -> Any:
    """`value` with every NaN or infinite float (in nested dicts and lists) replaced by None: a
    JSON document (and a Kubernetes status patch) cannot carry them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: scrub_non_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_non_finite(v) for v in value]
    return value
