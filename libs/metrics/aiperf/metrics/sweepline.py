"""Time-weighted ("sweep-line") metrics of a run: exact step functions over request events.

Every request contributes to a handful of step functions of time, built from its start,
first-token and end timestamps (and, when it streamed, the arrival of each later chunk):

- concurrency: requests in flight, ``[start, end)`` (failed requests included: they held a
  slot);
- prefill concurrency ``[start, first)`` and decode concurrency ``[first, end)``, for requests
  that produced a first token;
- prefill throughput: ``isl / (first - start)`` tokens/s spread over ``[start, first)``;
- decode throughput: ``(osl - 1) / (end - first)`` tokens/s over ``[first, end)`` (the first
  token arrives at ``first``, the other ``osl - 1`` over the decode phase). A request whose
  chunk gaps are known spreads them per chunk instead: each of its ``K`` non-zero gaps carries
  ``(osl - 1) / K`` tokens at ``tokens / gap`` over that gap (AIPerf's chunk-aware curve);
- total throughput: prefill plus the request-level (uniform) decode rate, as AIPerf adds them;
- per-user throughputs: a throughput divided by its phase's concurrency (0 where none is in
  that phase);
- tokens in flight: each request holds its ``isl`` over ``[start, end)`` and its generated
  tokens over ``[first, end)``: all ``osl`` at once, or (chunks known) 1 at ``first`` then
  ``(osl - 1) / K`` per chunk as the chunks arrive (a KV-cache occupancy proxy).

Events are summed per distinct timestamp, so a start and an end at the same instant never
produce a spurious step. Statistics are time-weighted over a window (default: first start to
last end): ``avg = sum(v * dt) / window``, ``std`` likewise, ``min``/``max`` over the pieces
that last, and ``pXX`` the smallest value ``v`` such that the curve is at or below ``v`` for
at least XX% of the time. "Active" statistics weigh only the pieces where a mask curve (the
phase's concurrency) is positive. This matches AIPerf 0.13's definitions; timestamps stay
integer nanoseconds throughout so durations and their sums are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

NS_PER_S = 1e9
SWEEP_PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


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


@dataclass(frozen=True, slots=True)
class Step:
    """A right-continuous step function: ``values[i]`` on ``[times[i], times[i+1])``, 0 before
    ``times[0]``. `times` are sorted, distinct integer nanoseconds."""

    times: IntArray
    values: FloatArray

    @classmethod
    def of_events(cls, times: IntArray, deltas: FloatArray) -> Step:
        """The running sum of `deltas` applied at `times` (any order; equal times summed)."""
        if times.size == 0:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.float64))
        distinct, where = np.unique(times, return_inverse=True)
        values = np.cumsum(np.bincount(where, weights=deltas, minlength=distinct.size))
        peak = float(np.max(np.abs(values))) if values.size else 0.0
        if peak > 0.0:  # + and - of the same float rarely cancel to exactly 0: snap the residue
            values[np.abs(values) < peak * 1e-9] = 0.0
        return cls(distinct.astype(np.int64), values.astype(np.float64, copy=False))

    def at(self, t: IntArray) -> FloatArray:
        """The values at times `t`."""
        if self.times.size == 0:
            return np.zeros(t.shape, np.float64)
        i = np.searchsorted(self.times, t, side="right") - 1
        return np.where(i >= 0, self.values[np.clip(i, 0, None)], 0.0)

    def divided_by(self, other: Step) -> Step:
        """Pointwise ``self / other``, 0 where `other` is not positive."""
        times = np.union1d(self.times, other.times).astype(np.int64)
        num, den = self.at(times), other.at(times)
        out = np.zeros_like(num)
        np.divide(num, den, out=out, where=den > 0)
        return Step(times, out)

    def plus(self, other: Step) -> Step:
        """Pointwise sum."""
        times = np.union1d(self.times, other.times).astype(np.int64)
        return Step(times, self.at(times) + other.at(times))


@dataclass(frozen=True, slots=True)
class Timeline:
    """Phase boundaries and token counts of a run's requests, one row per request.

    `start`/`first`/`end` are integer ns on one clock (any origin); `has_first` says whether
    the request produced a first token (`first` is ignored otherwise). `isl`/`osl` are token
    counts, NaN when unknown (a failed request). `icl` holds every request's chunk gaps (ns,
    concatenated in row order) and `icl_counts` how many belong to each row.
    """

    start: IntArray
    first: IntArray
    has_first: npt.NDArray[np.bool_]
    end: IntArray
    isl: FloatArray
    osl: FloatArray
    icl: IntArray
    icl_counts: IntArray

    @property
    def size(self) -> int:
        """Requests in the timeline."""
        return int(self.start.size)


@dataclass(frozen=True, slots=True)
class Curves:
    """The step functions of one timeline (see the module doc)."""

    concurrency: Step
    prefill_concurrency: Step
    decode_concurrency: Step
    prefill_throughput: Step
    decode_throughput: Step
    total_throughput: Step
    prefill_throughput_per_user: Step
    decode_throughput_per_user: Step
    tokens_in_flight: Step


def _intervals(lo: IntArray, hi: IntArray, weight: FloatArray) -> Step:
    keep = hi > lo
    w = weight[keep]
    return Step.of_events(np.concatenate([lo[keep], hi[keep]]), np.concatenate([w, -w]))


def _chunk_arrivals(tl: Timeline) -> tuple[IntArray, IntArray]:
    """(row of each gap, arrival time of the chunk that ends the gap)."""
    rows = np.repeat(np.arange(tl.size, dtype=np.int64), tl.icl_counts)
    if rows.size == 0:
        return rows, np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(tl.icl_counts)[:-1]]).astype(np.int64)
    running = np.cumsum(tl.icl)
    before = np.where(offsets > 0, running[np.clip(offsets - 1, 0, None)], 0)
    return rows, tl.first[rows] + running - before[rows]


@dataclass(frozen=True, slots=True)
class _RequestCurves:
    """The curves with a few events per request (cheap), and what the per-chunk ones need."""

    concurrency: Step
    prefill_concurrency: Step
    decode_concurrency: Step
    prefill_throughput: Step
    total_throughput: Step
    prefill_ok: npt.NDArray[np.bool_]
    decode_ok: npt.NDArray[np.bool_]
    dc: npt.NDArray[np.bool_]
    uniform_rate: FloatArray


def _request_curves(tl: Timeline) -> _RequestCurves:
    start, first, end, isl, osl = tl.start, tl.first, tl.end, tl.isl, tl.osl
    ones = np.ones(tl.size, np.float64)
    concurrency = _intervals(start, end, ones)
    prefill_ok = tl.has_first & (first > start)
    decode_ok = tl.has_first & (end > first)
    prefill_concurrency = _intervals(start[prefill_ok], first[prefill_ok], ones[prefill_ok])
    decode_concurrency = _intervals(first[decode_ok], end[decode_ok], ones[decode_ok])

    pf = prefill_ok & ~np.isnan(isl)
    prefill_rate = isl[pf] * NS_PER_S / (first[pf] - start[pf])
    prefill_throughput = _intervals(start[pf], first[pf], prefill_rate)

    dc = decode_ok & ~np.isnan(osl) & (osl >= 1)
    uniform_rate = (osl[dc] - 1.0) * NS_PER_S / (end[dc] - first[dc])
    total_throughput = Step.of_events(
        np.concatenate([start[pf], first[pf], first[dc], end[dc]]),
        np.concatenate([prefill_rate, -prefill_rate, uniform_rate, -uniform_rate]))
    return _RequestCurves(concurrency, prefill_concurrency, decode_concurrency, prefill_throughput,
                          total_throughput, prefill_ok, decode_ok, dc, uniform_rate)


def _decode_throughput(tl: Timeline, rc: _RequestCurves, rows: IntArray, arrivals: IntArray,
                       chunked: npt.NDArray[np.bool_]) -> Step:
    first, end, osl, dc = tl.first, tl.end, tl.osl, rc.dc
    gaps = tl.icl.astype(np.int64)
    nonzero = np.bincount(rows[gaps > 0], minlength=tl.size) if rows.size else np.zeros(tl.size, np.int64)
    by_chunk = chunked & (nonzero > 0)
    by_request = dc & ~by_chunk
    use = by_chunk[rows] & (gaps > 0) & tl.has_first[rows] & ~np.isnan(osl[rows]) & (osl[rows] >= 1)
    chunk_rate = (osl[rows[use]] - 1.0) / nonzero[rows[use]] * NS_PER_S / gaps[use]
    return Step.of_events(
        np.concatenate([arrivals[use] - gaps[use], arrivals[use], first[by_request], end[by_request]]),
        np.concatenate([chunk_rate, -chunk_rate, rc.uniform_rate[by_request[dc]], -rc.uniform_rate[by_request[dc]]]))


def _chunks(tl: Timeline) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
    rows, arrivals = _chunk_arrivals(tl)
    chunked = np.zeros(tl.size, bool)
    chunked[rows] = True
    return rows, arrivals, chunked


def build_curves(tl: Timeline) -> Curves:
    """All step functions of `tl`. Pure; O(n log n) in requests plus chunks."""
    rc = _request_curves(tl)
    rows, arrivals, chunked = _chunks(tl)
    decode_throughput = _decode_throughput(tl, rc, rows, arrivals, chunked)
    tokens_in_flight = _tokens_in_flight(tl, rc.prefill_ok, rc.decode_ok, chunked, rows, arrivals)
    return Curves(
        concurrency=rc.concurrency, prefill_concurrency=rc.prefill_concurrency,
        decode_concurrency=rc.decode_concurrency, prefill_throughput=rc.prefill_throughput,
        decode_throughput=decode_throughput, total_throughput=rc.total_throughput,
        prefill_throughput_per_user=rc.prefill_throughput.divided_by(rc.prefill_concurrency),
        decode_throughput_per_user=decode_throughput.divided_by(rc.decode_concurrency),
        tokens_in_flight=tokens_in_flight)


def _tokens_in_flight(tl: Timeline, prefill_ok: npt.NDArray[np.bool_], decode_ok: npt.NDArray[np.bool_],
                      chunked: npt.NDArray[np.bool_], rows: IntArray, arrivals: IntArray) -> Step:
    start, first, end, isl, osl = tl.start, tl.first, tl.end, tl.isl, tl.osl
    holds_input = prefill_ok & ~np.isnan(isl)
    gen = decode_ok & ~np.isnan(osl)
    whole = gen & ~chunked  # all output tokens counted at the first token
    ramp = gen & chunked & (osl >= 1)  # 1 at the first token, then (osl - 1) / K per chunk
    per_chunk = np.where(tl.icl_counts > 0, (osl - 1.0) / np.maximum(tl.icl_counts, 1), 0.0)
    arrived = ramp[rows] & (arrivals < end[rows])
    times = [start[holds_input], end[holds_input], first[whole], end[whole], first[ramp], arrivals[arrived]]
    deltas = [isl[holds_input], -isl[holds_input], osl[whole], -osl[whole], np.ones(int(ramp.sum())),
              per_chunk[rows[arrived]]]
    # whatever a ramping request accumulated is released at its end
    n_arrived = np.bincount(rows[arrived], minlength=tl.size) if rows.size else np.zeros(tl.size, np.int64)
    held = 1.0 + per_chunk * n_arrived
    times.append(end[ramp])
    deltas.append(-held[ramp])
    return Step.of_events(np.concatenate(times), np.concatenate(deltas))


def time_weighted(curve: Step, window_start: int, window_end: int, *,
                  active: Step | None = None) -> TimeWeightedStats:
    """Statistics of `curve` over ``[window_start, window_end]``, weighted by duration.

    With `active`, only the pieces where `active` is positive count, and the average is over
    their total duration. A curve with no events, an empty window or no active piece gives
    `TimeWeightedStats.zero()` (as AIPerf)."""
    if curve.times.size == 0 or window_end <= window_start:
        return TimeWeightedStats.zero()
    inside = [np.array([window_start, window_end], np.int64), curve.times]
    if active is not None:
        inside.append(active.times)
    grid = np.unique(np.concatenate(inside))
    del inside
    grid = grid[(grid >= window_start) & (grid <= window_end)]
    dt = np.diff(grid)
    values = curve.at(grid[:-1])
    if active is not None:
        keep = active.at(grid[:-1]) > 0
        values, dt = values[keep], dt[keep]
        del keep
        total = int(dt.sum())
    else:
        total = window_end - window_start
    del grid  # the temporaries go as soon as they are used: this is a long run's memory peak
    if total <= 0 or values.size == 0:
        return TimeWeightedStats.zero()
    weights = dt.astype(np.float64)
    avg = float(np.dot(values, weights) / total)
    std = math.sqrt(max(float(np.dot(weights, (values - avg) ** 2) / total), 0.0))
    order = np.argsort(values, kind="stable")
    ranked, held = values[order], np.cumsum(dt[order])
    del order, values, weights, dt
    # the first piece at which at least p% of the time is covered; exact in integer ns
    idx = np.searchsorted(held * 100, [p * int(held[-1]) for p in SWEEP_PERCENTILES], side="left")
    p50, p90, p95, p99 = (float(ranked[min(int(i), ranked.size - 1)]) for i in idx)
    return TimeWeightedStats(avg=avg, min=float(ranked[0]), max=float(ranked[-1]),
                             p50=p50, p90=p90, p95=p95, p99=p99, std=std)


def sweep_metrics(tl: Timeline, window: tuple[int, int] | None = None) -> dict[str, TimeWeightedStats]:
    """The 14 sweep metrics of AIPerf 0.13 for `tl`, keyed by tag, in AIPerf's order. `window`
    defaults to first start .. last end. Empty when the timeline has no request."""
    if tl.size == 0:
        return {}
    lo, hi = window if window is not None else (int(tl.start.min()), int(tl.end.max()))

    def tw(curve: Step, active: Step | None = None) -> TimeWeightedStats:
        return time_weighted(curve, lo, hi, active=active)

    # One per-chunk curve alive at a time (they hold most of the events): the peak memory of a
    # long run's summary is then about one curve's, not all of them at once.
    rc = _request_curves(tl)
    out = {
        "effective_concurrency": tw(rc.concurrency),
        "effective_prefill_throughput": tw(rc.prefill_throughput),
        "effective_decode_concurrency": tw(rc.decode_concurrency),
        "effective_prefill_concurrency": tw(rc.prefill_concurrency),
        "effective_total_throughput": tw(rc.total_throughput),
        "active_prefill_throughput": tw(rc.prefill_throughput, rc.prefill_concurrency),
        "active_total_throughput": tw(rc.total_throughput, rc.concurrency),
    }
    per_user = rc.prefill_throughput.divided_by(rc.prefill_concurrency)
    out["effective_prefill_throughput_per_user"] = tw(per_user)
    out["active_prefill_throughput_per_user"] = tw(per_user, rc.prefill_concurrency)
    del per_user
    rows, arrivals, chunked = _chunks(tl)
    curve = _decode_throughput(tl, rc, rows, arrivals, chunked)
    out["effective_decode_throughput"] = tw(curve)
    out["active_decode_throughput"] = tw(curve, rc.decode_concurrency)
    curve = curve.divided_by(rc.decode_concurrency)
    out["effective_decode_throughput_per_user"] = tw(curve)
    out["active_decode_throughput_per_user"] = tw(curve, rc.decode_concurrency)
    del curve
    out["tokens_in_flight"] = tw(_tokens_in_flight(tl, rc.prefill_ok, rc.decode_ok, chunked, rows, arrivals))
    return {tag: out[tag] for tag in SWEEP_ORDER}


SWEEP_ORDER = (
    "effective_concurrency", "effective_decode_throughput", "effective_prefill_throughput",
    "effective_decode_concurrency", "effective_prefill_concurrency", "effective_total_throughput",
    "effective_decode_throughput_per_user", "effective_prefill_throughput_per_user", "tokens_in_flight",
    "active_decode_throughput", "active_prefill_throughput", "active_decode_throughput_per_user",
    "active_prefill_throughput_per_user", "active_total_throughput",
)
"""The 14 sweep metrics, in AIPerf's order."""
