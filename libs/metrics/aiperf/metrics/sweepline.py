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

A long run's summary peaks here, so every curve is built and reduced in time windows: one
pass over the chunk gaps counts each request's chunks and samples the event times into windows
of about `WINDOW_EVENTS` events (at most ~`_MAX_WINDOWS` windows); then, for one statistic at a
time, each window's events are generated (for the rows of the blocks of `_ROWS` rows that reach
into it, their gaps read for that window),
summed per instant, continued from the window before and written as pieces (value, duration,
the phase's concurrency where needed) to a `PieceFile` (unnamed temporary files with `spill`);
the statistics read the pieces back in blocks (`aiperf.metrics.weighted.weighted_stats_of`:
AIPerf's sums by numpy's pairwise summation reproduced over blocks, percentiles by a radix
select). The peak is one window's events and a few bytes per request (~0.07 KiB per added
64-token request, `scripts/bench/memory.py sweep`). The floats are those of the straightforward
numpy formulas on whole arrays (an instant's deltas summed in event-list order; AIPerf 0.13's
``np.sum(v * dt) / total`` and its std); the tests compare them bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from aiperf.metrics.piecefile import PieceFile
from aiperf.metrics.weighted import TimeWeightedStats, weighted_stats_of

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NS_PER_S = 1e9

_BLOCK = 1 << 16
"""Elements per step of the blockwise loops: their temporaries stay small whatever the run."""
_EXACT_FLOAT_NS = 1 << 53
"""Durations below this are exact in float64, so one array serves as weights and durations."""


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


def _row_blocks(counts: IntArray) -> Iterator[tuple[int, int, int, int]]:
    """(first row, end row, first gap, end gap) of consecutive rows holding ~_BLOCK gaps (at
    least one row each), for rows holding `counts` gaps each."""
    offsets = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    r0 = 0
    while r0 < counts.size:
        r1 = int(np.searchsorted(offsets, offsets[r0] + _BLOCK, side="right")) - 1
        r1 = min(max(r1, r0 + 1), counts.size)
        yield r0, r1, int(offsets[r0]), int(offsets[r1])
        r0 = r1


def _heads(counts: IntArray) -> IntArray:
    """Where each of consecutive rows holding `counts` gaps starts among their gaps."""
    head = np.zeros(counts.size, np.int64)
    np.cumsum(counts[:-1], out=head[1:])
    return head


def _arrival_times(first: IntArray, gaps: IntArray, counts: IntArray) -> IntArray:
    """The arrival time of the chunk that ends each gap of consecutive rows holding `counts`
    gaps each (`first`: those rows' first-token times): its row's first token plus the row's
    gaps up to it (integers: exact)."""
    running = np.cumsum(gaps)
    before = np.concatenate([[0], running])[_heads(counts)]
    return np.repeat(first - before, counts) + running


def _gaps(tl: Timeline, r0: int, r1: int, g0: int, g1: int) -> tuple[IntArray, IntArray, IntArray]:
    """(row, gap, arrival time of the chunk that ends the gap) of the gaps of rows r0..r1."""
    counts = tl.icl_counts[r0:r1]
    gaps = tl.icl[g0:g1].astype(np.int64)
    rows = np.repeat(np.arange(r0, r1, dtype=np.int64), counts)
    return rows, gaps, _arrival_times(tl.first[r0:r1], gaps, counts)


# -- the curves ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Requests:
    """Which requests count in which phase (a byte per request each); rates are computed for
    the rows asked, element by element as over the whole arrays."""

    tl: Timeline
    prefill_ok: BoolArray
    decode_ok: BoolArray
    pf: BoolArray
    dc: BoolArray

    @classmethod
    def of(cls, tl: Timeline) -> _Requests:
        prefill_ok = tl.has_first & (tl.first > tl.start)
        decode_ok = tl.has_first & (tl.end > tl.first)
        return cls(tl, prefill_ok, decode_ok, prefill_ok & ~np.isnan(tl.isl),
                   decode_ok & ~np.isnan(tl.osl) & (tl.osl >= 1))

    def prefill_rate(self, rows: IntArray) -> FloatArray:
        """``isl / (first - start)`` tokens/s of rows in `pf`."""
        tl = self.tl
        return tl.isl[rows] * NS_PER_S / (tl.first[rows] - tl.start[rows])

    def uniform_rate(self, rows: IntArray) -> FloatArray:
        """``(osl - 1) / (end - first)`` tokens/s of rows in `dc`."""
        tl = self.tl
        return (tl.osl[rows] - 1.0) * NS_PER_S / (tl.end[rows] - tl.first[rows])


# -- built and reduced in time windows -----------------------------------------------------------
#
# Every curve is built one window of the run's time at a time: the window's events (those of the
# requests whose events can fall in it, their gaps read for that window alone), listed in the
# canonical order in which an instant's deltas are summed (by section, then by gap or row, as
# the straightforward formulas list them), then a stable sort by time, so each instant's deltas
# stay in that order. The window's instants continue the running sum of the ones before, and the
# pieces in the statistics' window go to a `PieceFile` (a temporary file with `spill`), which the
# statistics read back in blocks. The peak is one window's events and a few arrays per request.

WINDOW_EVENTS = 1 << 17
"""Events per time window (about: the windows cut the run at sampled event times)."""
_MAX_WINDOWS = 1 << 10
"""A run is cut into at most about this many windows (past it, windows grow with the run)."""
_ROWS = 1 << 12
"""Rows per block of the time index (a window reads the rows of the blocks that reach into it)."""

Window = tuple[int | None, int | None]
"""[start, end) in ns; None: unbounded."""


@dataclass(frozen=True, slots=True)
class _Chunks:
    """What one pass over the gaps tells of each request, and where the windows fall."""

    offsets: IntArray  # row r's gaps are icl[offsets[r]:offsets[r + 1]]
    nonzero: IntArray  # its gaps > 0
    before_end: IntArray  # its chunks that arrive before its end
    lo: IntArray  # its earliest and latest chunk arrival (its first token's time if none)
    hi: IntArray
    cuts: list[int]  # window boundaries: windows [cuts[i - 1], cuts[i]), open at both ends
    block_lo: IntArray  # per block of `_ROWS` rows, the earliest and latest event of its rows
    block_hi: IntArray

    @classmethod
    def of(cls, tl: Timeline) -> _Chunks:
        counts = tl.icl_counts
        offsets = np.zeros(tl.size + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        events = int(offsets[-1]) + 2 * tl.size
        per_window = max(WINDOW_EVENTS, -(-events // _MAX_WINDOWS))
        every = max(1, per_window // 64)  # ~64 samples per window
        nonzero = np.zeros(tl.size, np.int64)
        before_end = np.zeros(tl.size, np.int64)
        lo, hi = tl.first.copy(), tl.first.copy()
        samples = [tl.start[::every].copy(), tl.end[::every].copy()]
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
            samples.append(arrivals[(-g0) % every::every].copy())  # every `every`-th gap's (not a view)
        step = max(1, per_window // every)  # samples per window
        picks = np.sort(np.concatenate(samples))[step::step]
        cuts = picks[np.concatenate([[True], picks[1:] != picks[:-1]])].tolist() if picks.size else []
        lo[~tl.has_first], hi[~tl.has_first] = tl.start[~tl.has_first], tl.start[~tl.has_first]
        heads = np.arange(0, tl.size, _ROWS)
        block_lo = np.minimum.reduceat(np.minimum(lo, tl.start), heads)
        block_hi = np.maximum.reduceat(np.maximum(hi, tl.end), heads)
        return cls(offsets, nonzero, before_end, lo, hi, cuts, block_lo, block_hi)

    def rows(self, w: Window) -> IntArray:
        """The rows of the blocks whose events reach into `w` (ascending): every row with an
        event in `w` is among them."""
        reach = _inside(self.block_hi, (w[0], None)) & _inside(self.block_lo, (None, w[1]))
        blocks = np.flatnonzero(reach)
        if blocks.size == reach.size:
            return np.arange(self.lo.size, dtype=np.int64)
        return np.concatenate([np.arange(b * _ROWS, min((b + 1) * _ROWS, self.lo.size), dtype=np.int64)
                               for b in blocks.tolist()] or [np.zeros(0, np.int64)])

    def windows(self) -> Iterator[Window]:
        """The windows, in order."""
        edges: list[int | None] = [None, *self.cuts, None]
        return zip(edges[:-1], edges[1:], strict=True)

    def arrivals(self, tl: Timeline, rows: IntArray) -> Iterator[tuple[IntArray, IntArray, IntArray]]:
        """(row, gap, arrival time) of every gap of `rows` (ascending), in gap order, ~`_BLOCK`
        gaps at a time (one read when the rows' gaps are contiguous)."""
        counts = tl.icl_counts[rows]
        for a, b, _, _ in _row_blocks(counts):
            r, c = rows[a:b], counts[a:b]
            if not c.sum():
                continue
            owner = np.repeat(r, c)
            g0, g1 = int(self.offsets[r[0]]), int(self.offsets[r[-1] + 1])
            if g1 - g0 == owner.size:
                gaps = tl.icl[g0:g1].astype(np.int64)
            else:
                within = np.arange(owner.size, dtype=np.int64) - np.repeat(_heads(c), c)
                gaps = tl.icl[self.offsets[owner] + within].astype(np.int64)
            yield owner, gaps, _arrival_times(tl.first[r], gaps, c)


def _inside(t: IntArray, w: Window) -> BoolArray:
    out = np.ones(t.shape, bool)
    if w[0] is not None:
        out &= t >= w[0]
    if w[1] is not None:
        out &= t < w[1]
    return out


Deltas = Callable[[IntArray], FloatArray]
Section = tuple[IntArray, BoolArray, Deltas | float]
"""Request events: (time per row, which rows, the deltas of rows or one for all)."""
Events = Callable[[Window, IntArray], tuple[list[IntArray], list[FloatArray]]]
"""A curve's events in a window, in canonical order (lists of arrays, to concatenate), given the
rows that may have events there (ascending)."""


def _request_events(w: Window, near: IntArray, sections: list[Section], times: list[IntArray],
                    deltas: list[FloatArray]) -> None:
    """Append the events of each section that fall in `w`, by row (among the rows `near`)."""
    for t, mask, d in sections:
        rows = near[mask[near] & _inside(t[near], w)]
        times.append(t[rows])
        deltas.append(np.full(rows.size, d) if isinstance(d, float) else d(rows))


def _of_requests(sections: list[Section]) -> Events:
    def events(w: Window, near: IntArray) -> tuple[list[IntArray], list[FloatArray]]:
        times: list[IntArray] = []
        deltas: list[FloatArray] = []
        _request_events(w, near, sections, times, deltas)
        return times, deltas

    return events


@dataclass(frozen=True, slots=True)
class _Mask:
    """A concurrency (intervals ``[lo, hi)`` with ``hi > lo``): its value at any time from its
    sorted ends, exact (whole numbers), and its instants in a window."""

    lo: IntArray
    hi: IntArray

    @classmethod
    def of(cls, lo: IntArray, hi: IntArray, ok: BoolArray) -> _Mask:
        keep = ok & (hi > lo)
        return cls(np.sort(lo[keep]), np.sort(hi[keep]))

    def at(self, t: IntArray) -> IntArray:
        return np.searchsorted(self.lo, t, side="right") - np.searchsorted(self.hi, t, side="right")

    def times(self, w: Window) -> list[IntArray]:
        out = []
        for t in (self.lo, self.hi):
            a = 0 if w[0] is None else int(np.searchsorted(t, w[0], side="left"))
            b = t.size if w[1] is None else int(np.searchsorted(t, w[1], side="left"))
            out.append(t[a:b])
        return out


def _decode_events(tl: Timeline, rq: _Requests, ch: _Chunks) -> Events:
    """Decode throughput (module doc): each non-zero gap of a request whose gaps are known
    starts its chunk's rate at ``arrival - gap`` (section 0) and ends it at ``arrival``
    (section 1), by gap; the other decoding requests add their uniform rate at their first
    token (2) and take it off at their end (3), by row."""
    osl = tl.osl
    by_chunk = (tl.icl_counts > 0) & (ch.nonzero > 0)
    by_request = rq.dc & ~by_chunk
    used = by_chunk & tl.has_first & ~np.isnan(osl) & (osl >= 1)
    ur = rq.uniform_rate
    sections: list[Section] = [(tl.first, by_request, ur), (tl.end, by_request, lambda r: -ur(r))]

    def events(w: Window, near: IntArray) -> tuple[list[IntArray], list[FloatArray]]:
        rows = near[used[near] & _inside(ch.hi[near], (w[0], None)) & _inside(ch.lo[near], (None, w[1]))]
        starts: tuple[list[IntArray], list[FloatArray]] = ([], [])
        ends: tuple[list[IntArray], list[FloatArray]] = ([], [])
        for owner, gaps, arrivals in ch.arrivals(tl, rows):
            keep = gaps > 0
            owner, gaps, arrivals = owner[keep], gaps[keep], arrivals[keep]
            rate = (osl[owner] - 1.0) / ch.nonzero[owner] * NS_PER_S / gaps
            began = arrivals - gaps
            m = _inside(began, w)
            starts[0].append(began[m])
            starts[1].append(rate[m])
            m = _inside(arrivals, w)
            ends[0].append(arrivals[m])
            ends[1].append(-rate[m])
        times, deltas = starts[0] + ends[0], starts[1] + ends[1]
        _request_events(w, near, sections, times, deltas)
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

    def per_chunk(r: IntArray) -> FloatArray:  # of chunked rows
        return (osl[r] - 1.0) / np.maximum(tl.icl_counts[r], 1)

    head: list[Section] = [(start, hold, lambda r: isl[r]), (end, hold, lambda r: -isl[r]),
                           (first, whole, lambda r: osl[r]), (end, whole, lambda r: -osl[r]), (first, ramp, 1.0)]
    tail: list[Section] = [(end, ramp, lambda r: -(1.0 + per_chunk(r) * ch.before_end[r]))]

    def events(w: Window, near: IntArray) -> tuple[list[IntArray], list[FloatArray]]:
        times: list[IntArray] = []
        deltas: list[FloatArray] = []
        _request_events(w, near, head, times, deltas)
        rows = near[ramp[near] & _inside(ch.hi[near], (w[0], None)) & _inside(ch.lo[near], (None, w[1]))]
        for owner, _, arrivals in ch.arrivals(tl, rows):
            m = _inside(arrivals, w) & (arrivals < end[owner])
            times.append(arrivals[m])
            deltas.append(per_chunk(owner[m]))
        _request_events(w, near, tail, times, deltas)
        return times, deltas

    return events


@dataclass(frozen=True, slots=True)
class _Reduced:
    """The pieces of a curve in the statistics' window, and what reading them needs."""

    pieces: PieceFile  # (raw value, duration[, the mask's value])
    peak: float  # the curve's largest magnitude: values under peak * 1e-9 are read as 0
    total: int  # the time the statistics divide by


def _windowed(events: Events, ch: _Chunks, lo: int, hi: int, spill: Path | None, mask: _Mask | None = None,
              *, active: bool = False) -> _Reduced:
    """Build a curve window by window and keep its pieces in ``[lo, hi)`` (breakpoints at `lo`,
    `hi` and, with `mask`, at the mask's instants, where the pieces also record the mask's
    value; with `active` only the pieces where it is positive)."""
    durations = np.float64 if hi - lo < _EXACT_FLOAT_NS else np.int64
    dtypes: list[Any] = [np.float64, durations] + ([np.uint32] if mask is not None else [])
    store = PieceFile(dtypes, spill)
    carry, peak, total = 0.0, 0.0, 0
    pending_t, pending_v = np.zeros(0, np.int64), np.zeros(0)
    ends = np.array([lo, hi], np.int64)
    for w in ch.windows():
        times, deltas = events(w, ch.rows(w))
        breaks = [ends[_inside(ends, w)], *(mask.times(w) if mask is not None else [])]
        times.extend(breaks)
        deltas.extend(np.zeros(b.size) for b in breaks)
        t, d = np.concatenate(times), np.concatenate(deltas)
        del times, deltas, breaks
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
        i1 = min(int(np.searchsorted(t, hi, side="left")), t.size - 1)
        if i1 <= i0:
            continue
        dt = np.diff(t[i0:i1 + 1])
        v = values[i0:i1]
        if mask is None:
            store.append(v, dt)
            continue
        den = mask.at(t[i0:i1])
        if active:
            keep = den > 0
            v, dt, den = v[keep], dt[keep], den[keep]
            total += int(dt.sum())
        store.append(v, dt, den)
    return _Reduced(store, peak, total if active else hi - lo)


def _stats(reduced: _Reduced, *, per_user: bool = False, close: bool = True) -> TimeWeightedStats:
    """The statistics of the kept pieces, read back a block at a time (snapped, and divided by
    the mask's value where `per_user`: 0 where it is 0); the pieces dropped after (`close`)."""
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

    try:
        return weighted_stats_of(pieces, reduced.total)
    finally:
        if close:
            reduced.pieces.close()


def _phase(out: dict[str, TimeWeightedStats], phase: str, tput: Events, conc: Events, mask: _Mask,
           ch: _Chunks, lo: int, hi: int, spill: Path | None) -> None:
    """A phase's five statistics: its throughput while active (plain and per user, one build),
    per user and plain over the window, and its concurrency."""
    active = _windowed(tput, ch, lo, hi, spill, mask, active=True)
    try:
        out[f"active_{phase}_throughput"] = _stats(active, close=False)
        out[f"active_{phase}_throughput_per_user"] = _stats(active, per_user=True, close=False)
    finally:
        active.pieces.close()
    out[f"effective_{phase}_throughput_per_user"] = _stats(_windowed(tput, ch, lo, hi, spill, mask), per_user=True)
    out[f"effective_{phase}_throughput"] = _stats(_windowed(tput, ch, lo, hi, spill))
    out[f"effective_{phase}_concurrency"] = _stats(_windowed(conc, ch, lo, hi, spill))


def sweep_metrics(tl: Timeline, window: tuple[int, int] | None = None, *,
                  spill: Path | None = None) -> dict[str, TimeWeightedStats]:
    """The 14 sweep metrics of AIPerf 0.13 for `tl`, keyed by tag, in AIPerf's order. `window`
    defaults to first start .. last end. Empty when the timeline has no request. With `spill`
    (a directory), each curve's pieces wait in unnamed temporary files there between its build
    and its statistics; without, in memory (16-20 bytes per piece).

    Memory: a few arrays per request, and one time window's events (`WINDOW_EVENTS`, or
    1/`_MAX_WINDOWS` of the run's), besides `tl` (module doc)."""
    if tl.size == 0:
        return {}
    lo, hi = window if window is not None else (int(tl.start.min()), int(tl.end.max()))
    if hi <= lo:
        return {tag: TimeWeightedStats.zero() for tag in SWEEP_ORDER}
    rq = _Requests.of(tl)
    ch = _Chunks.of(tl)
    start, first, end = tl.start, tl.first, tl.end
    everyone = np.ones(tl.size, bool)
    out: dict[str, TimeWeightedStats] = {}
    pr, ur = rq.prefill_rate, rq.uniform_rate
    total = _of_requests([(start, rq.pf, pr), (first, rq.pf, lambda r: -pr(r)), (first, rq.dc, ur),
                          (end, rq.dc, lambda r: -ur(r))])
    out["active_total_throughput"] = _stats(_windowed(total, ch, lo, hi, spill, _Mask.of(start, end, everyone),
                                                      active=True))
    out["effective_total_throughput"] = _stats(_windowed(total, ch, lo, hi, spill))
    keep = everyone & (end > start)
    out["effective_concurrency"] = _stats(_windowed(_of_requests([(start, keep, 1.0), (end, keep, -1.0)]),
                                                    ch, lo, hi, spill))
    ok = rq.prefill_ok
    _phase(out, "prefill", _of_requests([(start, rq.pf, pr), (first, rq.pf, lambda r: -pr(r))]),
           _of_requests([(start, ok, 1.0), (first, ok, -1.0)]), _Mask.of(start, first, ok), ch, lo, hi, spill)
    ok = rq.decode_ok
    _phase(out, "decode", _decode_events(tl, rq, ch), _of_requests([(first, ok, 1.0), (end, ok, -1.0)]),
           _Mask.of(first, end, ok), ch, lo, hi, spill)
    out["tokens_in_flight"] = _stats(_windowed(_tokens_events(tl, rq, ch), ch, lo, hi, spill))
    return {tag: out[tag] for tag in SWEEP_ORDER}


SWEEP_ORDER = (
    "effective_concurrency", "effective_decode_throughput", "effective_prefill_throughput",
    "effective_decode_concurrency", "effective_prefill_concurrency", "effective_total_throughput",
    "effective_decode_throughput_per_user", "effective_prefill_throughput_per_user", "tokens_in_flight",
    "active_decode_throughput", "active_prefill_throughput", "active_decode_throughput_per_user",
    "active_prefill_throughput_per_user", "active_total_throughput",
)
"""The 14 sweep metrics, in AIPerf's order."""
