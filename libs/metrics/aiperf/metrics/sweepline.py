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
from typing import Any, Protocol

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it at its first call: ~25 ms at the end of a run; now with the module)
import numpy.typing as npt

from aiperf.metrics.weighted import TimeWeightedStats, weighted_stats

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


def _nonzero_gaps(tl: Timeline) -> tuple[IntArray, BoolArray]:
    """Gaps > 0 per row, and per row whether any of its gaps is negative."""
    nonzero = np.zeros(tl.size, np.int64)
    negative = np.zeros(tl.size, bool)
    for r0, r1, g0, g1 in _row_blocks(tl.icl_counts):
        gaps = tl.icl[g0:g1].astype(np.int64)
        rows = np.repeat(np.arange(r1 - r0), tl.icl_counts[r0:r1])
        nonzero[r0:r1] = np.bincount(rows[gaps > 0], minlength=r1 - r0)
        negative[r0:r1] = np.bincount(rows[gaps < 0], minlength=r1 - r0) > 0
    return nonzero, negative


def _decode_throughput(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    """Per chunk where the gaps are known, else uniform (module doc). One event per distinct
    instant of a request: its first token, then each chunk that ends a non-zero gap (the end of
    one chunk's interval is the start of the next non-zero one). A request with a negative gap
    (never from a monotonic clock, but a stored value may be) has chunk intervals that need not
    abut: each of its non-zero gaps is a start and an end event of its own, its arrays sized by
    those requests' gaps alone, so one such request never costs the whole run two events per
    chunk. An instant's deltas are summed as `_build` orders them: chunk starts, chunk ends (each
    by gap), then the uniform requests' firsts and ends (by row)."""
    first, end, osl = tl.first, tl.end, tl.osl
    nonzero, negative = _nonzero_gaps(tl)
    by_chunk = (tl.icl_counts > 0) & (nonzero > 0)
    by_request = rq.dc & ~by_chunk
    ur = rq.uniform_rate[by_request[rq.dc]]
    br_rows = np.flatnonzero(by_request)
    used = by_chunk & tl.has_first & ~np.isnan(osl) & (osl >= 1)
    u = np.flatnonzero(used & ~negative)
    offsets = np.zeros(u.size + 1, np.int64)  # row u[i] owns events offsets[i] .. offsets[i+1]-1
    np.cumsum(nonzero[u] + 1, out=offsets[1:])
    gap_start = np.zeros(tl.size + 1, np.int64)
    np.cumsum(tl.icl_counts, out=gap_start[1:])
    p_gap, p_start, p_end, p_rate = _paired_chunks(tl, np.flatnonzero(used & negative), gap_start, nonzero)
    a, b, c = int(offsets[-1]), br_rows.size, p_gap.size
    pairs = a + 2 * b  # the paired requests' chunk starts: pairs .. pairs+c-1, then their ends
    base = np.full(tl.size, -1, np.int64)
    base[u] = offsets[:-1]
    breaks = breaks[~np.isin(breaks, np.concatenate([first[u], first[br_rows], end[br_rows]]))]  # fewer ties
    times = np.empty(pairs + 2 * c + breaks.size, np.int64)
    # the gap that the k-th chunk event of a row ends is the row's gap k - 1 + skipped (the zero
    # gaps before it): one byte per event, usually; the rates are computed where needed
    skipped = np.zeros(a, np.min_scalar_type(int((tl.icl_counts[u] - nonzero[u]).max()) if u.size else 0))
    times[offsets[:-1]] = first[u]
    for r0, r1, g0, g1 in _row_blocks(tl.icl_counts):
        rows, gaps, arrivals = _gaps(tl, r0, r1, g0, g1)
        sel = (base[rows] >= 0) & (gaps > 0)
        rank = np.cumsum(sel, dtype=np.int64)
        row_start = np.zeros(r1 - r0, np.int64)
        np.cumsum(tl.icl_counts[r0:r1][:-1], out=row_start[1:])
        rank -= np.concatenate([[0], rank])[row_start][rows - r0]
        rows, rank = rows[sel], rank[sel]
        ids = base[rows] + rank
        times[ids] = arrivals[sel]
        skipped[ids] = g0 + np.flatnonzero(sel) - gap_start[rows] - (rank - 1)
    times[a:a + b] = first[br_rows]
    times[a + b:pairs] = end[br_rows]
    times[pairs:pairs + c] = p_start
    times[pairs + c:pairs + 2 * c] = p_end
    times[pairs + 2 * c:] = breaks
    del p_start, p_end

    def chunk_parts(i: IntArray) -> tuple[IntArray, FloatArray, IntArray, FloatArray]:
        """At events i: (the gap that starts, the rate of its chunk, the gap that ends, minus
        the rate of its chunk); a rate is 0.0 (and its gap 0) where no chunk starts or ends."""
        r = np.searchsorted(offsets, i, side="right") - 1
        row = u[r]
        scale = (osl[row] - 1.0) / nonzero[row]  # as (osl - 1) / K * 1e9 / gap, left to right
        gap = gap_start[row] + (i - offsets[r])  # + skipped[e] - 1: event e's gap, e = i or i + 1
        starts, ends = np.zeros(i.size), np.zeros(i.size)
        start_gap, end_gap = np.zeros(i.size, np.int64), np.zeros(i.size, np.int64)
        m = np.flatnonzero(i + 1 < offsets[r + 1])
        start_gap[m] = gap[m] + skipped[i[m] + 1].astype(np.int64)
        starts[m] = scale[m] * NS_PER_S / tl.icl[start_gap[m]].astype(np.int64)
        m = np.flatnonzero(i > offsets[r])
        end_gap[m] = gap[m] - 1 + skipped[i[m]].astype(np.int64)
        ends[m] = -(scale[m] * NS_PER_S / tl.icl[end_gap[m]].astype(np.int64))
        return start_gap, starts, end_gap, ends

    def fast(ids: IntArray) -> FloatArray:
        out = np.zeros(ids.size)
        m = ids < a
        _, starts, _, ends = chunk_parts(ids[m])
        out[m] = (0.0 + starts) + ends
        m = (ids >= a) & (ids < a + b)
        out[m] = 0.0 + ur[ids[m] - a]
        m = (ids >= a + b) & (ids < pairs)
        out[m] = 0.0 + -ur[ids[m] - a - b]
        m = (ids >= pairs) & (ids < pairs + c)
        out[m] = 0.0 + p_rate[ids[m] - pairs]
        m = (ids >= pairs + c) & (ids < pairs + 2 * c)
        out[m] = 0.0 + -p_rate[ids[m] - pairs - c]
        return out

    def slow(ids: IntArray) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
        q = ids.size
        section = np.full(2 * q, 9, np.int64)
        position = np.zeros(2 * q, np.int64)
        delta = np.zeros(2 * q)
        m = np.flatnonzero(ids < a)  # a chunk starts (section 0) and/or one ends (section 1)
        start_gap, starts, end_gap, ends = chunk_parts(ids[m])
        section[m], position[m], delta[m] = 0, start_gap, starts
        section[q + m], position[q + m], delta[q + m] = 1, end_gap, ends
        for sec, lo_id, sign in ((2, a, 1.0), (3, a + b, -1.0)):  # uniform requests' first, end
            m = np.flatnonzero((ids >= lo_id) & (ids < lo_id + b))
            j = ids[m] - lo_id
            section[m], position[m], delta[m] = sec, br_rows[j], sign * ur[j]
        for sec, lo_id, sign in ((0, pairs, 1.0), (1, pairs + c, -1.0)):  # paired requests' chunks
            m = np.flatnonzero((ids >= lo_id) & (ids < lo_id + c))
            j = ids[m] - lo_id
            section[m], position[m], delta[m] = sec, p_gap[j], sign * p_rate[j]
        return np.concatenate([np.arange(q), np.arange(q)]), section, position, delta

    return _build(times, fast, slow, real=pairs + 2 * c)


def _paired_chunks(tl: Timeline, rows: IntArray, gap_start: IntArray, nonzero: IntArray
                   ) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """(gap index, interval start, interval end, rate) of each non-zero gap of `rows`, in gap
    order: the chunk intervals of requests whose intervals need not abut."""
    counts = tl.icl_counts[rows]
    owner = np.repeat(rows, counts)
    row_off = np.zeros(rows.size + 1, np.int64)
    np.cumsum(counts, out=row_off[1:])
    gap = gap_start[owner] + (np.arange(owner.size, dtype=np.int64) - np.repeat(row_off[:-1], counts))
    gaps = tl.icl[gap].astype(np.int64)
    running = np.cumsum(gaps)
    arrivals = tl.first[owner] + running - np.repeat(np.concatenate([[0], running])[row_off[:-1]], counts)
    keep = gaps > 0
    owner, gap, gaps, arrivals = owner[keep], gap[keep], gaps[keep], arrivals[keep]
    rate = (tl.osl[owner] - 1.0) / nonzero[owner] * NS_PER_S / gaps
    return gap, arrivals - gaps, arrivals, rate


def _tokens_in_flight(tl: Timeline, rq: _Requests, breaks: IntArray) -> Step:
    """An event per chunk that arrives before its request ends, and a few per request. Where
    most chunks share their arrival instant with the chunk before them in their request (chunks
    read together share their read's stamp: at least half of them), each such run of a request's
    chunks is one event, whose delta is its chunks' deltas summed in order (exactly what they
    add where nothing else happens at that instant; `slow` gives them back one by one for an
    instant that other events share)."""
    start, first, end, isl, osl = tl.start, tl.first, tl.end, tl.isl, tl.osl
    chunked = tl.icl_counts > 0
    holds_input = rq.prefill_ok & ~np.isnan(isl)
    gen = rq.decode_ok & ~np.isnan(osl)
    whole = gen & ~chunked  # all output tokens counted at the first token
    ramp = gen & chunked & (osl >= 1)  # 1 at the first token, then (osl - 1) / K per chunk
    per_chunk = np.where(tl.icl_counts > 0, (osl - 1.0) / np.maximum(tl.icl_counts, 1), 0.0)
    arrived = np.zeros(tl.size, np.int64)
    runs = 0
    for r0, r1, g0, g1 in _row_blocks(tl.icl_counts):
        rows, arrivals = _arrived(tl, ramp, r0, r1, g0, g1)
        arrived[r0:r1] = np.bincount(rows - r0, minlength=r1 - r0)
        runs += int(_run_heads(rows, arrivals).sum())
    offsets = np.zeros(tl.size + 1, np.int64)  # row r's chunks are arrivals offsets[r] .. offsets[r+1]-1
    np.cumsum(arrived, out=offsets[1:])
    merge = runs * 2 <= int(offsets[-1])
    a = runs if merge else int(offsets[-1])  # the arrival events (runs, or single chunks)
    held = 1.0 + per_chunk * arrived  # whatever a ramping request accumulated goes at its end
    sections = [(0, start, holds_input, isl), (1, end, holds_input, -isl), (2, first, whole, osl),
                (3, end, whole, -osl), (4, first, ramp, np.ones(tl.size)), (6, end, ramp, -held)]
    req_t = np.concatenate([t[m] for _, t, m, _ in sections] + [breaks])
    req_d = np.concatenate([d[m] for _, _, m, d in sections] + [np.zeros(breaks.size)])
    req_sec = np.concatenate([np.full(int(m.sum()), s) for s, _, m, _ in sections] + [np.full(breaks.size, 9)])
    req_row = np.concatenate([np.flatnonzero(m) for _, _, m, _ in sections] + [np.zeros(breaks.size, np.int64)])
    times = np.empty(a + req_t.size, np.int64)
    run_start: IntArray | None = np.empty(a + 1, np.int64) if merge else None  # a run's first arrival
    write = 0
    for r0, r1, g0, g1 in _row_blocks(tl.icl_counts):
        rows, arrivals = _arrived(tl, ramp, r0, r1, g0, g1)
        if run_start is None:
            times[write:write + arrivals.size] = arrivals
            write += arrivals.size
            continue
        heads = np.flatnonzero(_run_heads(rows, arrivals))
        times[write:write + heads.size] = arrivals[heads]
        run_start[write:write + heads.size] = offsets[r0] + heads
        write += heads.size
    if run_start is not None:
        run_start[a] = offsets[-1]
    times[a:] = req_t
    del req_t

    def chunks_of(e: IntArray) -> tuple[IntArray, IntArray]:
        """(first arrival, how many) of arrival events `e`."""
        if run_start is None:
            return e, np.ones(e.size, np.int64)
        return run_start[e], run_start[e + 1] - run_start[e]

    def fast(ids: IntArray) -> FloatArray:
        out = np.empty(ids.size)
        m = ids < a
        head, count = chunks_of(ids[m])
        out[m] = _repeated_sums(per_chunk[np.searchsorted(offsets, head, side="right") - 1], count)
        out[~m] = 0.0 + req_d[ids[~m] - a]
        return out

    def slow(ids: IntArray) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
        m = np.flatnonzero(ids < a)  # arrivals: section 5, in gap order (their arrival numbers are)
        head, count = chunks_of(ids[m])
        owner = np.repeat(m, count)
        arrival = np.repeat(head, count) + (np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count))
        rows = np.searchsorted(offsets, arrival, side="right") - 1
        other = np.flatnonzero(ids >= a)
        j = ids[other] - a
        return (np.concatenate([owner, other]), np.concatenate([np.full(owner.size, 5), req_sec[j]]),
                np.concatenate([arrival, req_row[j]]), np.concatenate([per_chunk[rows], req_d[j]]))

    return _build(times, fast, slow, real=times.size - breaks.size)


def _arrived(tl: Timeline, ramp: BoolArray, r0: int, r1: int, g0: int, g1: int) -> tuple[IntArray, IntArray]:
    """(row, arrival time) of the chunks of rows r0..r1 that count in tokens in flight: those of
    ramping requests that arrive before their request ends, in gap order."""
    rows, _, arrivals = _gaps(tl, r0, r1, g0, g1)
    got = ramp[rows] & (arrivals < tl.end[rows])
    return rows[got], arrivals[got]


def _run_heads(rows: IntArray, times: IntArray) -> BoolArray:
    """Where a run of consecutive chunks of one row at one instant starts."""
    head = np.ones(rows.size, bool)
    if rows.size:
        head[1:] = (rows[1:] != rows[:-1]) | (times[1:] != times[:-1])
    return head


def _repeated_sums(values: FloatArray, counts: IntArray) -> FloatArray:
    """``((0.0 + v) + v) + ...`` with `counts` terms (>= 1) of each value `v`."""
    sums = 0.0 + values
    live, k = np.flatnonzero(counts > 1), 1
    while live.size:
        sums[live] += values[live]
        k += 1
        live = live[counts[live] > k]
    return sums


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


def sweep_metrics(tl: Timeline, window: tuple[int, int] | None = None) -> dict[str, TimeWeightedStats]:
    """The 14 sweep metrics of AIPerf 0.13 for `tl`, keyed by tag, in AIPerf's order. `window`
    defaults to first start .. last end. Empty when the timeline has no request.

    Memory: about 24 bytes per chunk at the peak, besides `tl` (module doc)."""
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
    # keeping a copy): the peak is one per-chunk curve and its durations, whatever the run.
    for phase, conc_of, tput_of in (("prefill", _prefill_concurrency, _prefill_throughput),
                                    ("decode", _decode_concurrency, _decode_throughput)):
        mask = conc_of(tl, rq, ends)
        breaks = with_breaks(mask)
        out[f"active_{phase}_throughput"] = _active_of(tput_of(tl, rq, breaks), mask, lo, hi)
        out[f"active_{phase}_throughput_per_user"] = _active_of(tput_of(tl, rq, breaks), mask, lo, hi,
                                                                per_user=True)
        out[f"effective_{phase}_throughput_per_user"] = _effective_per_user(tput_of(tl, rq, breaks), mask, lo, hi)
        out[f"effective_{phase}_throughput"] = _effective(tput_of(tl, rq, ends), lo, hi)
        out[f"effective_{phase}_concurrency"] = _effective(mask, lo, hi)
        del mask, breaks
    out["effective_concurrency"] = _effective(conc, lo, hi)
    out["tokens_in_flight"] = _effective(_tokens_in_flight(tl, rq, ends), lo, hi)
    return {tag: out[tag] for tag in SWEEP_ORDER}


SWEEP_ORDER = (
    "effective_concurrency", "effective_decode_throughput", "effective_prefill_throughput",
    "effective_decode_concurrency", "effective_prefill_concurrency", "effective_total_throughput",
    "effective_decode_throughput_per_user", "effective_prefill_throughput_per_user", "tokens_in_flight",
    "active_decode_throughput", "active_prefill_throughput", "active_decode_throughput_per_user",
    "active_prefill_throughput_per_user", "active_total_throughput",
)
"""The 14 sweep metrics, in AIPerf's order."""
