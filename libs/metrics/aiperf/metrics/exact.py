"""numpy's statistics of a long column, bit for bit, read in blocks: no float64 copy of it.

`MetricStats.of_values` calls ``np.mean``, ``np.min``, ``np.max``, ``np.sum``, ``np.std`` and
``np.percentile`` (linear) on ``values = column.astype(float64) * scale`` with the NaNs removed:
four float64 arrays of the whole column at once, ~1.1 KiB per 64-token request for the chunk
gaps of a long run. `block_stats` returns the very same floats from the column's blocks, each
converted and scaled on its own (the conversion and the scaling are per element, so a block of
``values`` is the same whichever way the column is cut):

- sum: numpy's pairwise summation of a contiguous float64 array (``pairwise_sum`` in numpy's
  umath loops: ``n <= 128`` values are summed with 8 accumulators, a longer run is split at
  ``n // 2`` rounded down to a multiple of 8, recursively; the reduction starts from ``+0.0``),
  evaluated over the same tree: each leaf (<= 128 consecutive values) summed as numpy sums it,
  the leaves combined in the tree's order. ``avg = sum / n``.
- std: as ``np.std`` (numpy's ``_var``): the deviations ``(v - avg) ** 2`` summed the same way,
  divided by ``n``, square-rooted.
- min, max: per block, then over the blocks.
- percentiles: the order statistics that ``np.percentile`` reads (``(n - 1) * q`` rounded down
  and up, clipped) found by a radix select on the values' order-preserving 64-bit keys (four
  passes of a 16-bit histogram, none holding values), then numpy's interpolation
  (``_lerp``: ``a + (b - a) * t``, or ``b - (b - a) * (1 - t)`` where ``t >= 0.5``).

A column holding -0.0 among its values (where numpy's min, max and partition may return either
zero) is computed by numpy on the whole array instead (`values` is called): exact either way.
The tests check every stat against numpy with Hypothesis (`tests/test_exact.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

BLOCK = 1 << 16
"""Values per block that callers hand over (any size works; the temporaries are a few blocks)."""
_PW_BLOCKSIZE = 128  # numpy's PW_BLOCKSIZE: longest run summed without splitting
_DIGIT = 16
_SIGN = np.uint64(1 << 63)


@dataclass(frozen=True, slots=True)
class BlockStats:
    """The statistics of `MetricStats.of_values`, as numpy computes them (see the module doc)."""

    count: int
    avg: float
    min: float
    max: float
    sum: float
    percentiles: tuple[float, ...]
    std: float


Blocks = Callable[[], Iterable[npt.NDArray[np.number]]]
"""Returns a fresh iterable over a column's raw blocks, in order (read several times)."""


def block_stats(blocks: Blocks, scale: float, percentiles: tuple[int, ...],
                values: Callable[[], FloatArray] | None = None) -> BlockStats | None:
    """Stats of ``concatenate(blocks()).astype(float64) * scale`` without its NaNs (None when
    nothing is left), equal bit for bit to numpy's on that array. `values` gives that whole
    array for the one case computed by numpy itself (a -0.0 among the values); without it the
    whole array is built from `blocks`."""
    def scaled() -> Iterator[FloatArray]:
        for raw in blocks():
            v = np.asarray(raw, dtype=np.float64) * scale
            keep = ~np.isnan(v)
            yield v if keep.all() else v[keep]

    with np.errstate(all="ignore"):  # inf - inf and the like: NaN, as numpy's (the caller's errstate aside)
        return _block_stats(scaled, scale, percentiles, values)


def _block_stats(scaled: Callable[[], Iterator[FloatArray]], scale: float, percentiles: tuple[int, ...],
                 values: Callable[[], FloatArray] | None) -> BlockStats | None:
    n, lo, hi, negative_zero = 0, np.inf, -np.inf, False
    for v in scaled():
        if v.size:
            n += v.size
            lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
            negative_zero = negative_zero or bool(np.any((v == 0.0) & np.signbit(v)))
    if n == 0:
        return None
    if negative_zero:
        return _numpy_stats(values() if values is not None else np.concatenate(list(scaled())), percentiles)
    total = pairwise_sum(scaled(), n)
    mean = total / n
    squares = (np.square(v - mean) for v in scaled())
    std = float(np.sqrt(pairwise_sum(squares, n) / n))
    return BlockStats(count=n, avg=mean, min=lo, max=hi, sum=total,
                      percentiles=_percentiles(scaled, n, percentiles), std=std)


def _numpy_stats(values: FloatArray, percentiles: tuple[int, ...]) -> BlockStats:
    pct = np.percentile(values, percentiles)
    return BlockStats(count=int(values.size), avg=float(np.mean(values)), min=float(np.min(values)),
                      max=float(np.max(values)), sum=float(np.sum(values)),
                      percentiles=tuple(float(p) for p in pct), std=float(np.std(values)))


# -- pairwise summation ------------------------------------------------------------------------


def leaf_sizes(n: int) -> list[int]:
    """The lengths of the runs numpy's pairwise sum adds without splitting, in order."""
    return list(_leaf_sizes(n))


def _leaf_sizes(n: int) -> Iterator[int]:
    """`leaf_sizes`, one at a time (a stack of O(log n) entries, not a list of n / 128)."""
    stack = [n]
    while stack:
        m = stack.pop()
        if m <= _PW_BLOCKSIZE:
            yield m
            continue
        half = m // 2
        half -= half % 8
        stack.append(m - half)  # the right part after the left one
        stack.append(half)


def _leaf_sum(a: FloatArray) -> float:
    """numpy's sum of one run of <= 128 values (any length), in Python floats (IEEE doubles)."""
    n = a.size
    values = a.tolist()
    if n < 8:
        res = 0.0
        for x in values:
            res += x
        return res
    r = values[:8]
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += values[i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for x in values[i:]:
        res += x
    return res


def _leaf_sums(buf: FloatArray, sizes: npt.NDArray[np.int64]) -> FloatArray:
    """numpy's sum of each run of `buf`, cut into runs of `sizes` (consecutive, covering it)."""
    out = np.empty(sizes.size)
    starts = np.zeros(sizes.size, np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    for m in np.unique(sizes).tolist():
        which = np.flatnonzero(sizes == m)
        if m % 8 or m < 8:
            for k in which.tolist():
                out[k] = _leaf_sum(buf[starts[k]:starts[k] + m])
            continue
        x = buf[starts[which][:, None] + np.arange(m)].reshape(which.size, m // 8, 8)
        r = x[:, 0, :].copy()
        for t in range(1, m // 8):
            r += x[:, t, :]
        out[which] = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + ((r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7]))
    return out


def pairwise_sum(blocks: Iterable[FloatArray], n: int) -> float:
    """``np.add.reduce`` of the `n` values that `blocks` yield in order, bit for bit. Streams:
    the leaves are summed as their values arrive and the tree is evaluated as they are (O(log n)
    partial sums held, besides a block)."""
    def leaves() -> Iterator[float]:
        sizes = _leaf_sizes(n)
        waiting = next(sizes, None)  # the next leaf's size, not yet covered by the values
        carry = np.zeros(0)
        for block in blocks:
            buf = np.concatenate([carry, block]) if carry.size else block
            got: list[int] = []
            used = 0
            while waiting is not None and used + waiting <= buf.size:
                got.append(waiting)
                used += waiting
                waiting = next(sizes, None)
            if got:
                yield from _leaf_sums(buf[:used], np.asarray(got, np.int64)).tolist()
            carry = buf[used:].copy() if used < buf.size else np.zeros(0)
        assert waiting is None and carry.size == 0, "the blocks hold another number of values"

    found = leaves()

    def tree(m: int) -> float:
        if m <= _PW_BLOCKSIZE:
            return next(found)
        half = m // 2
        half -= half % 8
        left = tree(half)
        return left + tree(m - half)

    total = 0.0 + tree(n)
    for _ in found:  # run the generator to its end: its check that every value was summed
        raise AssertionError("the blocks hold another number of values")
    return total


# -- percentiles -------------------------------------------------------------------------------


def _keys(v: FloatArray) -> npt.NDArray[np.uint64]:
    """Order-preserving unsigned keys of floats (no NaN): negative ones' bits flipped, the sign
    bit set on the others."""
    bits = v.view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _of_key(key: int) -> float:
    """The float whose `_keys` key is `key`."""
    bits = key ^ (1 << 63) if key >> 63 else ~key & ((1 << 64) - 1)
    return float(np.array([bits], np.uint64).view(np.float64)[0])


def _select(scaled: Callable[[], Iterable[FloatArray]], ranks: list[int]) -> dict[int, float]:
    """The value of each rank (0-based, ascending) of the values: a radix select on `_keys`, one
    16-bit digit per pass over the blocks (4 passes), histograms only."""
    prefix = dict.fromkeys(ranks, 0)  # the rank's key, the digits found so far
    below = dict.fromkeys(ranks, 0)  # values whose key is below the rank's prefix
    for shift in range(64 - _DIGIT, -1, -_DIGIT):
        wanted = sorted(set(prefix.values()))
        slot = {p: i for i, p in enumerate(wanted)}
        counts = np.zeros(len(wanted) << _DIGIT, np.int64)
        want = np.asarray(wanted, np.uint64)
        top = shift + _DIGIT
        for v in scaled():
            k = _keys(v)
            high = k >> np.uint64(top) if top < 64 else np.zeros(k.size, np.uint64)
            pos = np.searchsorted(want, high)
            hit = (pos < want.size) & (want[np.minimum(pos, want.size - 1)] == high)
            digit = (k[hit] >> np.uint64(shift)) & np.uint64((1 << _DIGIT) - 1)
            index = (pos[hit].astype(np.int64) << _DIGIT) + digit.astype(np.int64)
            if index.size * 4 >= counts.size:
                counts += np.bincount(index, minlength=counts.size)
            else:  # a short block: cost by its size, not the histogram's
                at, c = np.unique(index, return_counts=True)
                counts[at] += c
        for r in ranks:
            p = prefix[r]
            hist = counts[slot[p] << _DIGIT:(slot[p] + 1) << _DIGIT]
            cum = np.cumsum(hist)
            d = int(np.searchsorted(cum, r - below[r], side="right"))
            below[r] += int(cum[d - 1]) if d else 0
            prefix[r] = (p << _DIGIT) | d
    return {r: _of_key(k) for r, k in prefix.items()}


def _percentiles(scaled: Callable[[], Iterable[FloatArray]], n: int, percentiles: tuple[int, ...]
                 ) -> tuple[float, ...]:
    """``np.percentile(values, percentiles)`` (linear) from the order statistics it reads."""
    q = np.true_divide(np.asarray(percentiles), 100)
    virtual = (n - 1) * q
    previous = np.floor(virtual)
    nxt = previous + 1
    above = virtual >= n - 1
    previous[above], nxt[above] = -1, -1
    below = virtual < 0
    previous[below], nxt[below] = 0, 0
    prev_i, next_i = previous.astype(np.intp), nxt.astype(np.intp)
    gamma = np.asarray(virtual - prev_i, dtype=virtual.dtype)
    ranks = sorted({int(i) % n for i in (*prev_i.tolist(), *next_i.tolist())})
    found = _select(scaled, ranks)
    a = np.array([found[int(i) % n] for i in prev_i.tolist()])
    b = np.array([found[int(i) % n] for i in next_i.tolist()])
    diff = b - a
    out = np.add(a, diff * gamma)
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5, casting="unsafe")
    return tuple(out.tolist())


def array_blocks(data: npt.NDArray[np.number], size: int = BLOCK) -> Iterator[npt.NDArray[np.number]]:
    """Views of `data`, `size` values at a time."""
    for a in range(0, data.size, size):
        yield data[a:a + size]


__all__ = ["BLOCK", "BlockStats", "Blocks", "array_blocks", "block_stats", "leaf_sizes", "pairwise_sum"]
