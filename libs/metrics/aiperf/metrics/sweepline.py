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

A long run's summary peaks here, so the curves with an event per chunk are built for one
statistic at a time and reduced in place: one event per chunk (a request's chunk intervals
abut), one sort, the curve's times turned into the durations, percentiles by a radix select on
the values' bits instead of an argsort (`aiperf.metrics.weighted`), every other temporary in
blocks of `_BLOCK` elements: about 1.5 KiB per 64-token request at the peak
(`scripts/bench/memory.py sweep`). The floats
are those of the straightforward numpy formulas (an instant's deltas summed in event-list order,
one dot product over all pieces); the tests compare them bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it at its first call: ~25 ms at the end of a run; now with the module)
import numpy.typing as npt

from aiperf.metrics.piecefile import PieceFile
from aiperf.metrics.weighted import TimeWeightedStats, weighted_stats, weighted_stats_of

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NS_PER_S = 1e9

_BLOCK = 1 << 16
"""Elements per step of the blockwise loops: their temporaries stay small whatever the run."""
_EXACT_FLOAT_NS = 1 << 53
"""Durations below this are exact in float64, so one array serves as weights and durations."""


@dataclass(frozen=True, slots=True)
class Step:
    """A right-continuous step function: ``values[i]`` on ``[times[i], times[i+1])``, 0 before
    ``times[0]``. `times` are sorted, distinct integer nanoseconds."""

    times: IntArray
    values: FloatArray

    @classmethod
    def of_events(cls, times: IntArray, deltas: FloatArray) -> Step:
        """The running sum of `deltas` applied at `times` (any order; the deltas of equal times
        are summed in their order in the arrays, starting from 0.0)."""
        return _small(times, deltas)

    def at(self, t: IntArray) -> FloatArray:
        """The values at times `t`."""
        if self.times.size == 0:
            return np.zeros(t.shape, np.float64)
        i = np.searchsorted(self.times, t, side="right") - 1
        return np.where(i >= 0, self.values[np.clip(i, 0, None)], 0.0)


class GapReader(Protocol):
    """What the sweep reads of the chunk gaps: ``g[i:j]`` and ``g[int_array]`` as numpy arrays,
    `size` and `dtype` (a numpy array, or `aiperf.metrics.columns.FileArray` over a spill file)."""

    @property
    def size(self) -> int: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    def __getitem__(self, key: slice | IntArray) -> npt.NDArray[np.number]: ...


@dataclass(frozen=True, slots=True)
class Timeline:
    """Phase boundaries and token counts of a run's requests, one row per request.

    `start`/`first`/`end` are integer ns on one clock (any origin); `has_first` says whether
    the request produced a first token (`first` is ignored otherwise). `isl`/`osl` are token
    counts, NaN when unknown (a failed request). `icl` holds every request's chunk gaps (ns,
    concatenated in row order; any numeric dtype holding whole numbers, e.g. the aggregator's
    compact uint32 column, read without a copy, or a `GapReader` that reads them from a file
    on demand) and `icl_counts` how many belong to each row.
    """

    start: IntArray
    first: IntArray
    has_first: npt.NDArray[np.bool_]
    end: IntArray
    isl: FloatArray
    osl: FloatArray
    icl: npt.NDArray[np.number] | GapReader
    icl_counts: IntArray

    @property
    def size(self) -> int:
        """Requests in the timeline."""
        return int(self.start.size)


# -- exact step functions from events ----------------------------------------------------------
#
# AIPerf-exact values need the deltas of one instant summed in a fixed order (the order of the
# event lists, as `np.bincount` would) and the running sum over instants. The big curves have an
# event per chunk, so an event is an id into a `times` array and two callbacks give its deltas:
# `fast(ids)` the sum of an event's own deltas (exact when it is alone at its instant, the usual
# case) and `slow(ids)` every delta with its (section, position) key, to sum the few instants
# several events share in the canonical order. Adding 0.0 never changes such a sum (it starts
# at +0.0, so it is never -0.0): breakpoints are events without deltas.

Fast = Callable[[IntArray], FloatArray]
Slow = Callable[[IntArray], tuple[IntArray, IntArray, IntArray, FloatArray]]


def _sequential_sums(deltas: FloatArray, starts: IntArray) -> FloatArray:
    """``((0.0 + d0) + d1) + ...`` of each run ``deltas[starts[i]:starts[i+1]]``."""
    sizes = np.diff(np.append(starts, deltas.size))
    sums = 0.0 + deltas[starts]
    live, k = np.flatnonzero(sizes > 1), 1
    while live.size:
        sums[live] += deltas[starts[live] + k]
        k += 1
        live = live[sizes[live] > k]
    return sums


def _build(times: IntArray, fast: Fast, slow: Slow, real: int | None = None) -> Step:
    """The step function of the events ``0..times.size-1`` (see above); the ids from `real` on
    are breakpoints (no delta). Consumes `times` (sorted in place); the result's arrays are views
    of it and of one new array of the same size. Instants are summed in blocks of ~`_BLOCK`
    events (an instant's events always in one block), so the temporaries stay small even where
    most events share their instant (chunks that arrived in one read share its stamp)."""
    if times.size == 0:
        return Step(np.zeros(0, np.int64), np.zeros(0, np.float64))
    real = times.size if real is None else real
    order = np.argsort(times)  # ties in any order: their sums are ordered by key below
    times.sort()
    values = order.view(np.float64)  # each block's ids are read before its values are written
    a = 0
    while a < times.size:
        b = int(np.searchsorted(times, times[min(a + _BLOCK, times.size) - 1], side="right"))
        ids = order[a:b].copy()
        t = times[a:b]
        block = fast(ids)
        head = np.ones(t.size, bool)
        np.not_equal(t[1:], t[:-1], out=head[1:])
        if not head.all():  # instants that several events share
            starts = np.flatnonzero(head)
            sums = np.add.reduceat(block, starts)  # one event with deltas and breakpoints (0.0)
            gid = np.cumsum(head) - 1
            several = np.bincount(gid[ids < real], minlength=starts.size) > 1
            if several.any():  # several events with deltas at one instant: in canonical order
                members = np.flatnonzero(several[gid])
                sums[several] = _canonical_sums(ids[members], gid[members], slow)
            block[starts] = sums
        values[a:b] = block
        a = b
    n = _compact_distinct(times, values)
    times, values = times[:n], values[:n]
    np.cumsum(values, out=values)
    _snap(values)
    return Step(times, values)


def _canonical_sums(ids: IntArray, gid: IntArray, slow: Slow) -> FloatArray:
    """The sum of each instant's deltas in canonical order (by section, then position), for the
    events `ids` grouped by instant `gid` (ascending); one sum per instant, in that order."""
    owner, section, position, deltas = slow(ids)
    group = gid[owner]
    key = np.lexsort((position, section, group))
    group, deltas = group[key], deltas[key]
    first = np.ones(group.size, bool)
    first[1:] = group[1:] != group[:-1]
    return _sequential_sums(deltas, np.flatnonzero(first))


def _compact_distinct(times: IntArray, values: FloatArray) -> int:
    """Keep the first entry of each run of equal `times` (sorted), in place; the new size."""
    write, prev = 0, None
    for a in range(0, times.size, _BLOCK):
        t = times[a:a + _BLOCK]
        keep = np.empty(t.size, bool)
        keep[0] = prev is None or t[0] != prev
        np.not_equal(t[1:], t[:-1], out=keep[1:])
        prev = int(t[-1])
        kept_t, kept_v = t[keep], values[a:a + _BLOCK][keep]
        times[write:write + kept_t.size] = kept_t
        values[write:write + kept_t.size] = kept_v
        write += kept_t.size
    return write


def _snap(values: FloatArray) -> None:
    """+ and - of the same float rarely cancel to exactly 0: snap the residue (in place)."""
    if values.size == 0:
        return
    peak = max(float(values.max()), -float(values.min()))
    if peak > 0.0:
        for a in range(0, values.size, _BLOCK):
            v = values[a:a + _BLOCK]
            v[np.abs(v) < peak * 1e-9] = 0.0


def _small(times: IntArray, deltas: FloatArray, breaks: IntArray | None = None) -> Step:
    """The step function of a few events per request (plus zero-delta `breaks`)."""
    extra = breaks if breaks is not None else np.zeros(0, np.int64)
    t = np.concatenate([times.astype(np.int64, copy=False), extra.astype(np.int64, copy=False)])
    d = np.concatenate([deltas.astype(np.float64, copy=False), np.zeros(extra.size)])

    def slow(ids: IntArray) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
        return np.arange(ids.size), np.zeros(ids.size, np.int64), ids, d[ids]

    return _build(t, lambda ids: 0.0 + d[ids], slow, real=times.size)


def _row_blocks(counts: IntArray) -> Iterator[tuple[int, int, int, int]]:
    """(first row, end row, first gap, end gap) of consecutive rows holding ~_BLOCK gaps."""
    offsets = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    r0 = 0
    while r0 < counts.size:
        r1 = int(np.searchsorted(offsets, offsets[r0] + _BLOCK, side="right")) - 1
        r1 = min(max(r1, r0 + 1), counts.size)
        yield r0, r1, int(offsets[r0]), int(offsets[r1])
        r0 = r1


def _gaps(tl: Timeline, r0: int, r1: int, g0: int, g1: int) -> tuple[IntArray, IntArray, IntArray]:
    """(row, gap, arrival time of the chunk that ends the gap) of the gaps of rows r0..r1."""
    counts = tl.icl_counts[r0:r1]
    gaps = tl.icl[g0:g1].astype(np.int64)
    rows = np.repeat(np.arange(r0, r1, dtype=np.int64), counts)
    running = np.cumsum(gaps)
    row_start = np.zeros(r1 - r0, np.int64)
    np.cumsum(counts[:-1], out=row_start[1:])
    before = np.concatenate([[0], running])[row_start]
    return rows, gaps, tl.first[rows] + running - before[rows - r0]


# -- the curves ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Requests:
    """Per-request quantities of a timeline (a few arrays of its size)."""

    prefill_ok: BoolArray
    decode_ok: BoolArray
    pf: BoolArray
    prefill_rate: FloatArray
    dc: BoolArray
    uniform_rate: FloatArray

    @classmethod
    def of(cls, tl: Timeline) -> _Requests:
        start, first, end, isl, osl = tl.start, tl.first, tl.end, tl.isl, tl.osl
        prefill_ok = tl.has_first & (first > start)
        decode_ok = tl.has_first & (end > first)
        pf = prefill_ok & ~np.isnan(isl)
        dc = decode_ok & ~np.isnan(osl) & (osl >= 1)
        return cls(prefill_ok, decode_ok, pf, isl[pf] * NS_PER_S / (first[pf] - start[pf]), dc,
                   (osl[dc] - 1.0) * NS_PER_S / (end[dc] - first[dc]))


def _intervals(lo: IntArray, hi: IntArray, weight: FloatArray, breaks: IntArray) -> Step:
    keep = hi > lo
    w = weight[keep]
    return _small(np.concatenate([lo[keep], hi[keep]]), np.concatenate([w, -w]), breaks)


def _concurrency(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    return _intervals(tl.start, tl.end, np.ones(tl.size), breaks)


def _prefill_concurrency(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    ok = rq.prefill_ok
    return _intervals(tl.start[ok], tl.first[ok], np.ones(int(ok.sum())), breaks)


def _decode_concurrency(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    ok = rq.decode_ok
    return _intervals(tl.first[ok], tl.end[ok], np.ones(int(ok.sum())), breaks)


def _prefill_throughput(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    return _intervals(tl.start[rq.pf], tl.first[rq.pf], rq.prefill_rate, breaks)


def _total_throughput(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    pf, dc, pr, ur = rq.pf, rq.dc, rq.prefill_rate, rq.uniform_rate
    return _small(np.concatenate([tl.start[pf], tl.first[pf], tl.first[dc], tl.end[dc]]),
                  np.concatenate([pr, -pr, ur, -ur]), breaks)


# -- the curves with an event per chunk, built and reduced in time windows -----------------------
#
# Decode throughput and tokens in flight have an event per chunk. Each is built one window of
# the run's time at a time: the window's events (those of the requests whose events can fall in
# it, their gaps read for that window alone), listed in the canonical order in which an
# instant's deltas are summed (by section, then by gap or row, as the straightforward formulas
# list them), then a stable sort by time, so each instant's deltas stay in that order. The
# window's instants continue the running sum of the ones before, and the pieces in the
# statistics' window go to a `PieceFile` (a temporary file with `spill`), which the statistics
# read back in blocks. The peak is one window's events, whatever the run.

WINDOW_EVENTS = 1 << 18
"""Chunk events per time window (about: the windows cut the run at sampled arrival times)."""
_MAX_WINDOWS = 64
"""A run's chunks are cut into at most this many windows (each window scans the requests)."""


@dataclass(frozen=True, slots=True)
class _Chunks:
    """What one pass over the gaps tells of each request, and where the windows fall."""

    offsets: IntArray  # row r's gaps are icl[offsets[r]:offsets[r + 1]]
    nonzero: IntArray  # its gaps > 0
    before_end: IntArray  # its chunks that arrive before its end
    lo: IntArray  # its earliest and latest chunk event (its first token's time if none)
    hi: IntArray
    cuts: list[int]  # window boundaries: windows [cuts[i - 1], cuts[i]), open at both ends

    @classmethod
    def of(cls, tl: Timeline) -> _Chunks:
        counts = tl.icl_counts
        offsets = np.zeros(tl.size + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        chunks = int(offsets[-1])
        per_window = max(WINDOW_EVENTS, -(-chunks // _MAX_WINDOWS))
        every = max(1, per_window // 64)  # ~64 samples per window
        nonzero = np.zeros(tl.size, np.int64)
        before_end = np.zeros(tl.size, np.int64)
        lo, hi = tl.first.copy(), tl.first.copy()
        samples = []
        for r0, r1, g0, g1 in _row_blocks(counts):
            rows, gaps, arrivals = _gaps(tl, r0, r1, g0, g1)
            if not rows.size:
                continue
            local = rows - r0
            nonzero[r0:r1] = np.bincount(local[gaps > 0], minlength=r1 - r0)
            before_end[r0:r1] = np.bincount(local[arrivals < tl.end[rows]], minlength=r1 - r0)
            has = np.flatnonzero(counts[r0:r1] > 0)
            at = offsets[r0:r1][has] - g0
            lo[r0 + has] = np.minimum(lo[r0 + has], np.minimum.reduceat(arrivals, at))
            hi[r0 + has] = np.maximum(hi[r0 + has], np.maximum.reduceat(arrivals, at))
            samples.append(arrivals[(-g0) % every::every].copy())  # every `every`-th gap's (a copy: not a view of the block)
        cuts: list[int] = []
        if samples:
            step = max(1, per_window // every)  # samples per window
            s = np.sort(np.concatenate(samples))
            cuts = np.unique(s[step::step]).tolist()
        return cls(offsets, nonzero, before_end, lo, hi, cuts)

    def windows(self) -> Iterator[tuple[int | None, int | None]]:
        """The windows' (start, end) times, in order; None: unbounded."""
        edges: list[int | None] = [None, *self.cuts, None]
        return zip(edges[:-1], edges[1:], strict=True)  # type: ignore[return-value]

    def arrivals(self, tl: Timeline, rows: IntArray) -> Iterator[tuple[IntArray, IntArray, IntArray, IntArray]]:
        """(row, gap index, gap, arrival time) of every gap of `rows` (ascending), in gap order,
        ~`_BLOCK` gaps at a time."""
        counts = tl.icl_counts[rows]
        ends = np.cumsum(counts)
        a = 0
        while a < rows.size:
            b = int(np.searchsorted(ends, (ends[a - 1] if a else 0) + _BLOCK, side="right"))
            b = min(max(b, a + 1), rows.size)
            r, c = rows[a:b], counts[a:b]
            a = b
            if not c.sum():
                continue
            owner = np.repeat(r, c)
            head = np.zeros(r.size, np.int64)
            np.cumsum(c[:-1], out=head[1:])
            within = np.arange(owner.size, dtype=np.int64) - np.repeat(head, c)
            index = self.offsets[owner] + within
            g0, g1 = int(self.offsets[r[0]]), int(self.offsets[r[-1] + 1])
            gaps = (tl.icl[g0:g1] if g1 - g0 == owner.size else tl.icl[index]).astype(np.int64)
            running = np.cumsum(gaps)
            before = np.concatenate([[0], running])[np.repeat(head, c)]
            yield owner, index, gaps, tl.first[owner] + running - before


def _inside(t: IntArray, t0: int | None, t1: int | None) -> BoolArray:
    out = np.ones(t.shape, bool)
    if t0 is not None:
        out &= t >= t0
    if t1 is not None:
        out &= t < t1
    return out


Events = Callable[[int | None, int | None], tuple[list[IntArray], list[FloatArray]]]
"""A curve's events with times in a window, in canonical order (lists of arrays, concatenated)."""


def _request_events(t0: int | None, t1: int | None, sections: list[tuple[IntArray, BoolArray, FloatArray]],
                    times: list[IntArray], deltas: list[FloatArray]) -> None:
    """Append the events (time, delta) of each section (times, which rows, deltas per row)
    that fall in the window, by row."""
    for t, mask, d in sections:
        rows = np.flatnonzero(mask & _inside(t, t0, t1))
        times.append(t[rows])
        deltas.append(d[rows])


def _decode_events(tl: Timeline, rq: _Requests, ch: _Chunks) -> Events:
    """Decode throughput (module doc): each non-zero gap of a request whose gaps are known
    starts its chunk's rate at ``arrival - gap`` (section 0) and ends it at ``arrival``
    (section 1), by gap; the other decoding requests add their uniform rate at their first
    token (2) and take it off at their end (3), by row."""
    osl = tl.osl
    by_chunk = (tl.icl_counts > 0) & (ch.nonzero > 0)
    by_request = rq.dc & ~by_chunk
    used = by_chunk & tl.has_first & ~np.isnan(osl) & (osl >= 1)
    uniform = np.zeros(tl.size)
    uniform[rq.dc] = rq.uniform_rate
    sections = [(tl.first, by_request, uniform), (tl.end, by_request, -uniform)]

    def events(t0: int | None, t1: int | None) -> tuple[list[IntArray], list[FloatArray]]:
        rows = np.flatnonzero(used & _inside(ch.hi, t0, None) & _inside(ch.lo, None, t1))
        starts: tuple[list[IntArray], list[FloatArray]] = ([], [])
        ends: tuple[list[IntArray], list[FloatArray]] = ([], [])
        for owner, _, gaps, arrivals in ch.arrivals(tl, rows):
            keep = gaps > 0
            owner, gaps, arrivals = owner[keep], gaps[keep], arrivals[keep]
            rate = (osl[owner] - 1.0) / ch.nonzero[owner] * NS_PER_S / gaps
            began = arrivals - gaps
            m = _inside(began, t0, t1)
            starts[0].append(began[m])
            starts[1].append(rate[m])
            m = _inside(arrivals, t0, t1)
            ends[0].append(arrivals[m])
            ends[1].append(-rate[m])
        times, deltas = starts[0] + ends[0], starts[1] + ends[1]
        _request_events(t0, t1, sections, times, deltas)
        return times, deltas

    return events


def _tokens_events(tl: Timeline, rq: _Requests, ch: _Chunks) -> Events:
    """Tokens in flight (module doc), in sections: input held from start (0) to end (1); all
    output at the first token (2) to the end (3) where the chunks are not known; else 1 at the
    first token (4), ``(osl - 1) / K`` per chunk that arrives before the end (5, by gap), and
    what was held taken off at the end (6)."""
    start, first, end, isl, osl = tl.start, tl.first, tl.end, tl.isl, tl.osl
    chunked = tl.icl_counts > 0
    hold = rq.prefill_ok & ~np.isnan(isl)
    gen = rq.decode_ok & ~np.isnan(osl)
    whole = gen & ~chunked
    ramp = gen & chunked & (osl >= 1)
    per_chunk = np.where(chunked, (osl - 1.0) / np.maximum(tl.icl_counts, 1), 0.0)
    held = 1.0 + per_chunk * ch.before_end
    head = [(start, hold, isl), (end, hold, -isl), (first, whole, osl), (end, whole, -osl),
            (first, ramp, np.ones(tl.size))]

    def events(t0: int | None, t1: int | None) -> tuple[list[IntArray], list[FloatArray]]:
        times: list[IntArray] = []
        deltas: list[FloatArray] = []
        _request_events(t0, t1, head, times, deltas)
        rows = np.flatnonzero(ramp & _inside(ch.hi, t0, None) & _inside(ch.lo, None, t1))
        for owner, _, _, arrivals in ch.arrivals(tl, rows):
            m = _inside(arrivals, t0, t1) & (arrivals < end[owner])
            times.append(arrivals[m])
            deltas.append(per_chunk[owner[m]])
        _request_events(t0, t1, [(end, ramp, -held)], times, deltas)
        return times, deltas

    return events


@dataclass(frozen=True, slots=True)
class _Reduced:
    """The pieces of a windowed curve in the statistics' window, and what reading them needs."""

    pieces: PieceFile  # (raw value, duration[, the mask's value])
    peak: float  # the curve's largest magnitude: values under peak * 1e-9 are read as 0
    total: int  # the time the pieces cover


def _windowed(events: Events, ch: _Chunks, breaks: IntArray, lo: int, hi: int, mask: Step | None,
              active: bool, spill: Path | None) -> _Reduced:
    """Build a curve window by window (events, plus zero-delta `breaks`, sorted) and keep its
    pieces in ``[lo, hi)``: with `mask`, each with the mask's value at its start, and with
    `active` only those where it is positive."""
    durations = np.float64 if hi - lo < _EXACT_FLOAT_NS else np.int64
    dtypes: list[Any] = [np.float64, durations] + ([np.uint32] if mask is not None else [])
    store = PieceFile(dtypes, spill)
    carry, peak, total = 0.0, 0.0, 0
    pending_t, pending_v = np.zeros(0, np.int64), np.zeros(0)
    for t0, t1 in ch.windows():
        times, deltas = events(t0, t1)
        b0 = 0 if t0 is None else int(np.searchsorted(breaks, t0, side="left"))
        b1 = breaks.size if t1 is None else int(np.searchsorted(breaks, t1, side="left"))
        times.append(breaks[b0:b1])
        deltas.append(np.zeros(b1 - b0))
        t, d = np.concatenate(times), np.concatenate(deltas)
        del times, deltas
        if not t.size:
            continue
        order = np.argsort(t, kind="stable")  # an instant's deltas stay in canonical order
        t, d = t[order], d[order]
        del order
        heads = np.ones(t.size, bool)
        np.not_equal(t[1:], t[:-1], out=heads[1:])
        starts = np.flatnonzero(heads)
        values = _sequential_sums(d, starts)
        t = t[starts]
        del d, heads, starts
        values[0] = carry + values[0]
        np.cumsum(values, out=values)
        carry = float(values[-1])
        peak = max(peak, float(np.max(np.abs(values))))
        t, values = np.concatenate([pending_t, t]), np.concatenate([pending_v, values])
        pending_t, pending_v = t[-1:], values[-1:]
        i0 = int(np.searchsorted(t, lo, side="left"))
        i1 = int(np.searchsorted(t, hi, side="left"))
        i1 = min(i1, t.size - 1)
        if i1 <= i0:
            continue
        dt = np.diff(t[i0:i1 + 1])
        v = values[i0:i1]
        if mask is None:
            store.append(v, dt)
            total += int(dt.sum())
            continue
        den = mask.at(t[i0:i1])
        if active:
            keep = den > 0
            v, dt, den = v[keep], dt[keep], den[keep]
        store.append(v, dt, den)
        total += int(dt.sum())
    return _Reduced(store, peak, total if active else hi - lo)


def _windowed_stats(reduced: _Reduced, *, per_user: bool = False) -> TimeWeightedStats:
    """The statistics of the kept pieces, read back a block at a time (snapped, and divided by
    the mask's value where `per_user`: 0 where it is 0)."""
    peak = reduced.peak

    def pieces() -> Iterator[tuple[FloatArray, FloatArray | IntArray]]:
        for block in reduced.pieces.blocks():
            v = np.array(block[0], np.float64)
            if peak > 0.0:
                v[np.abs(v) < peak * 1e-9] = 0.0
            if per_user:
                den = block[2]
                keep = den > 0
                np.divide(v, den, out=v, where=keep)
                np.copyto(v, 0.0, where=~keep)
            yield v, block[1]

    return weighted_stats_of(pieces, reduced.total)


def _reduce(reduced: _Reduced, *, per_user: bool = False) -> TimeWeightedStats:
    """`_windowed_stats`, then the pieces dropped."""
    try:
        return _windowed_stats(reduced, per_user=per_user)
    finally:
        reduced.pieces.close()


# -- statistics --------------------------------------------------------------------------------


def _pieces(curve: Step, lo: int, hi: int, probe: Step | None = None
            ) -> tuple[FloatArray, FloatArray | IntArray, npt.NDArray[np.unsignedinteger] | None]:
    """(value, duration, `probe` value) of each piece of `curve` in ``[lo, hi]``. `curve` must
    have breakpoints at `lo` and `hi` and is consumed: its times become the durations, float64
    when the window is short enough for that to be exact, else int64."""
    t, v = curve.times, curve.values
    i0 = int(np.searchsorted(t, lo, side="right")) - 1
    i1 = int(np.searchsorted(t, hi, side="left"))
    grid = t[i0:i1 + 1]
    found: npt.NDArray[np.unsignedinteger] | None = None
    if probe is not None:  # a concurrency: whole numbers, in the smallest type that holds them
        top = float(probe.values.max()) if probe.values.size else 0.0
        found = np.empty(i1 - i0, np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32)
        for a in range(0, i1 - i0, _BLOCK):
            found[a:a + _BLOCK] = probe.at(grid[a:min(a + _BLOCK, i1 - i0)])
    for a in range(0, grid.size - 1, _BLOCK):  # durations in place, front to back
        b = min(a + _BLOCK, grid.size - 1)
        grid[a:b] = grid[a + 1:b + 1] - grid[a:b]
    dt: FloatArray | IntArray = grid[:-1]
    if hi - lo < _EXACT_FLOAT_NS:
        as_float = dt.view(np.float64)
        for a in range(0, dt.size, _BLOCK):
            as_float[a:a + _BLOCK] = dt[a:a + _BLOCK]
        dt = as_float
    return v[i0:i1], dt, found


def _effective(curve: Step, lo: int, hi: int) -> TimeWeightedStats:
    values, dt, _ = _pieces(curve, lo, hi)
    return weighted_stats(values, dt, hi - lo)


def _per_user(values: FloatArray, den: npt.NDArray[np.unsignedinteger], keep: BoolArray) -> None:
    """`values` / `den` in place, 0 where none is in the phase."""
    np.divide(values, den, out=values, where=keep)
    np.copyto(values, 0.0, where=~keep)


def _active_of(curve: Step, mask: Step, lo: int, hi: int, *, per_user: bool = False) -> TimeWeightedStats:
    """Stats of `curve` (or curve / mask) over the pieces where `mask` (a concurrency) is
    positive; `curve` has breakpoints at `mask`'s times, `lo` and `hi`, and is consumed."""
    values, dt, den = _pieces(curve, lo, hi, mask)
    assert den is not None
    keep = den > 0
    if per_user:
        _per_user(values, den, keep)
    del den
    n = _compact_kept(values, dt, keep)
    values, dt = values[:n], dt[:n]
    return weighted_stats(values, dt, int(dt.sum()))  # whole numbers under 2**53, or int64: exact


def _effective_per_user(curve: Step, mask: Step, lo: int, hi: int) -> TimeWeightedStats:
    """Stats of curve / mask over the window (`curve` as in `_active_of`, consumed)."""
    values, dt, den = _pieces(curve, lo, hi, mask)
    assert den is not None
    _per_user(values, den, den > 0)
    del den
    return weighted_stats(values, dt, hi - lo)


def _compact_kept(values: FloatArray, dt: FloatArray | IntArray, keep: BoolArray) -> int:
    """Move the pieces where `keep` to the front, in order, in place; how many."""
    write = 0
    for a in range(0, keep.size, _BLOCK):
        k = keep[a:a + _BLOCK]
        v, d = values[a:a + _BLOCK][k], dt[a:a + _BLOCK][k]
        values[write:write + v.size] = v
        dt[write:write + v.size] = d
        write += v.size
    return write


def sweep_metrics(tl: Timeline, window: tuple[int, int] | None = None, *,
                  spill: Path | None = None) -> dict[str, TimeWeightedStats]:
    """The 14 sweep metrics of AIPerf 0.13 for `tl`, keyed by tag, in AIPerf's order. `window`
    defaults to first start .. last end. Empty when the timeline has no request. With `spill`
    (a directory), the pieces of the curves with an event per chunk wait in unnamed temporary
    files there between their build and their statistics.

    Memory: a few arrays per request, and the events of one time window (`WINDOW_EVENTS`
    chunks, or 1/`_MAX_WINDOWS` of the run's), besides `tl` (module doc)."""
    if tl.size == 0:
        return {}
    lo, hi = window if window is not None else (int(tl.start.min()), int(tl.end.max()))
    if hi <= lo:
        return {tag: TimeWeightedStats.zero() for tag in SWEEP_ORDER}
    rq = _Requests.of(tl)
    ends = np.array([lo, hi], np.int64)

    def with_breaks(mask: Step) -> IntArray:
        return np.concatenate([ends, mask.times])

    out: dict[str, TimeWeightedStats] = {}
    conc = _concurrency(tl, rq, ends)
    out["active_total_throughput"] = _active_of(_total_throughput(tl, rq, with_breaks(conc)), conc, lo, hi)
    out["effective_total_throughput"] = _effective(_total_throughput(tl, rq, ends), lo, hi)
    # Each curve is built for one statistic and consumed by it (rebuilding is cheaper than
    # keeping a copy).
    mask = _prefill_concurrency(tl, rq, ends)
    breaks = with_breaks(mask)
    out["active_prefill_throughput"] = _active_of(_prefill_throughput(tl, rq, breaks), mask, lo, hi)
    out["active_prefill_throughput_per_user"] = _active_of(_prefill_throughput(tl, rq, breaks), mask, lo, hi,
                                                           per_user=True)
    out["effective_prefill_throughput_per_user"] = _effective_per_user(_prefill_throughput(tl, rq, breaks),
                                                                       mask, lo, hi)
    out["effective_prefill_throughput"] = _effective(_prefill_throughput(tl, rq, ends), lo, hi)
    out["effective_prefill_concurrency"] = _effective(mask, lo, hi)
    # The per-chunk curves: built window by window, their pieces kept in a `PieceFile`.
    ch = _Chunks.of(tl)
    mask = _decode_concurrency(tl, rq, ends)
    breaks = np.sort(with_breaks(mask))
    decode = _decode_events(tl, rq, ch)
    active = _windowed(decode, ch, breaks, lo, hi, mask, True, spill)
    try:
        out["active_decode_throughput"] = _windowed_stats(active)
        out["active_decode_throughput_per_user"] = _windowed_stats(active, per_user=True)
    finally:
        active.pieces.close()
    out["effective_decode_throughput_per_user"] = _reduce(_windowed(decode, ch, breaks, lo, hi, mask, False, spill),
                                                          per_user=True)
    del breaks
    out["effective_decode_throughput"] = _reduce(_windowed(decode, ch, ends, lo, hi, None, False, spill))
    out["effective_decode_concurrency"] = _effective(mask, lo, hi)
    del mask
    out["effective_concurrency"] = _effective(conc, lo, hi)
    out["tokens_in_flight"] = _reduce(_windowed(_tokens_events(tl, rq, ch), ch, ends, lo, hi, None, False, spill))
    return {tag: out[tag] for tag in SWEEP_ORDER}


SWEEP_ORDER = (
    "effective_concurrency", "effective_decode_throughput", "effective_prefill_throughput",
    "effective_decode_concurrency", "effective_prefill_concurrency", "effective_total_throughput",
    "effective_decode_throughput_per_user", "effective_prefill_throughput_per_user", "tokens_in_flight",
    "active_decode_throughput", "active_prefill_throughput", "active_decode_throughput_per_user",
    "active_prefill_throughput_per_user", "active_total_throughput",
)
"""The 14 sweep metrics, in AIPerf's order."""
