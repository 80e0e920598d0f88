"""Quasi-random sample points of a parameter space: the `latin_hypercube` and `sobol` sweep
types of AIPerf 0.13 (`sweep: {type, samples, seed, dimensions}`), with numpy only.

AIPerf draws them with scipy's `scipy.stats.qmc` engines; scipy is not a dependency here, so:

- `latin_hypercube` with `optimization: null` draws the same points as AIPerf for the same seed
  (a jitter `uniform(size=(n, d))`, then one shuffled stratum order per dimension, from
  `numpy.random.default_rng(seed)`; the point is (stratum - jitter) / n). With AIPerf's default
  `optimization: random-cd` (or `lloyd`), AIPerf then moves the points to lower their
  discrepancy; we do not: the plan is that vanilla Latin hypercube (the same count, bounds and
  one point per stratum of every dimension, other points).
- `sobol` with `scramble: false` gives the same points as AIPerf (the Sobol sequence of Joe and
  Kuo's direction numbers, in Gray-code order, 30 bits). With AIPerf's default `scramble: true`
  its points are Owen-scrambled by scipy; ours are scrambled by a random digital shift from
  `numpy.random.default_rng(seed)`: the same count and bounds, and the same balance (for a power
  of two samples, one point in each 1/n slice of every dimension), other points.

Points lie in [0, 1); `map_unit` maps one to a dimension's value as AIPerf does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

BITS = 30
"""Bits of a Sobol coordinate (scipy's default)."""

# Joe & Kuo (2008), "Constructing Sobol sequences with better two-dimensional projections", file
# new-joe-kuo-6.21201: dimensions 2.. as (degree s, polynomial coefficients a, initial m_1..m_s).
# Dimension 1 is the van der Corput sequence (every m = 1).
_JOE_KUO = (
    (1, 0, (1,)), (2, 1, (1, 3)), (3, 1, (1, 3, 1)), (3, 2, (1, 1, 1)), (4, 1, (1, 1, 3, 3)),
    (4, 4, (1, 3, 5, 13)), (5, 2, (1, 1, 5, 5, 17)), (5, 4, (1, 1, 5, 5, 5)), (5, 7, (1, 1, 7, 11, 19)),
)
MAX_SOBOL_DIMENSIONS = len(_JOE_KUO) + 1
"""How many dimensions our Sobol sequence has direction numbers for."""


def _directions(dimension: int) -> list[int]:
    """The `BITS` direction numbers of Sobol dimension `dimension` (0-based), as integers."""
    if dimension == 0:
        return [1 << (BITS - 1 - k) for k in range(BITS)]
    s, a, m = _JOE_KUO[dimension - 1]
    v = [m[k] << (BITS - 1 - k) for k in range(s)]
    for k in range(s, BITS):
        value = v[k - s] ^ (v[k - s] >> s)
        for bit in range(1, s):
            if (a >> (s - 1 - bit)) & 1:
                value ^= v[k - bit]
        v.append(value)
    return v


def sobol(n: int, d: int, *, seed: int | None = None, scramble: bool = True) -> np.ndarray:
    """The first `n` points (n x d) of the `d`-dimensional Sobol sequence in Gray-code order,
    shifted by a random digital shift from `seed` when `scramble`. Raises `ValueError` beyond
    `MAX_SOBOL_DIMENSIONS` dimensions or `2**BITS` points."""
    if d > MAX_SOBOL_DIMENSIONS:
        raise ValueError(f"sobol: at most {MAX_SOBOL_DIMENSIONS} dimensions")
    if n > 1 << BITS:
        raise ValueError(f"sobol: at most 2**{BITS} points")
    directions = [_directions(j) for j in range(d)]
    shift = [int(s) for s in np.random.default_rng(seed).integers(0, 1 << BITS, size=d)] if scramble else [0] * d
    points = np.empty((n, d))
    x = [0] * d
    for i in range(n):
        if i:
            c = ((i - 1) ^ i).bit_length() - 1  # the lowest zero bit of i - 1
            x = [xj ^ directions[j][c] for j, xj in enumerate(x)]
        points[i] = [(xj ^ shift[j]) / (1 << BITS) for j, xj in enumerate(x)]
    return points


def latin_hypercube(n: int, d: int, *, seed: int | None = None) -> np.ndarray:
    """`n` points (n x d) of a Latin hypercube: in every dimension, one point in each 1/n
    stratum, jittered uniformly within it (see the module for AIPerf's `optimization`)."""
    rng = np.random.default_rng(seed)
    jitter = rng.uniform(size=(n, d))
    strata = np.tile(np.arange(1, n + 1), (d, 1))
    for row in strata:
        rng.shuffle(row)
    result: np.ndarray = (strata.T - jitter) / n
    return result


def map_unit(u: float, *, lo: float | None = None, hi: float | None = None, scale: str = "linear",
             kind: str = "real", choices: Sequence[Any] | None = None) -> Any:
    """The value of a dimension at unit coordinate `u` (AIPerf's mapping): the choice at
    floor(u * len(choices)); else lo..hi, linear or logarithmic; an `int` dimension rounds
    (half to even) and stays within [ceil(lo), floor(hi)]."""
    if choices is not None:
        return choices[min(math.floor(u * len(choices)), len(choices) - 1)]
    assert lo is not None and hi is not None
    if scale == "log":
        value = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    else:
        value = lo + u * (hi - lo)
    if kind == "int":
        return max(math.ceil(lo), min(int(round(value)), math.floor(hi)))
    return float(value)
