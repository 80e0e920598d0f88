"""Length and delay samplers shared by synthetic and file datasets (AIPerf's distributions)."""

from __future__ import annotations

import math

import numpy as np

from aiperf.config import Delay, Length, Prompts
from aiperf.config.benchmark import Peak, lognormal_sigma

__all__ = ["draw_length", "max_tokens", "session_id", "sequence_lengths", "turn_delay_ms"]


def _component(rng: np.random.Generator, mean: float, stddev: float, median: float | None) -> float:
    if median is not None:
        sigma = lognormal_sigma(mean, median)
        return float(math.exp(rng.normal(math.log(median), sigma))) if sigma > 0 else mean
    return float(rng.normal(mean, stddev)) if stddev > 0 else mean


def _choose(rng: np.random.Generator, weights: list[float]) -> int:
    total = sum(weights)
    r, cumulative = float(rng.random()) * total, 0.0
    for index, weight in enumerate(weights):
        cumulative += weight
        if r < cumulative:
            return index
    return len(weights) - 1


def draw_length(rng: np.random.Generator, length: Length) -> int:
    """One draw of `length` (normal, log-normal, mixture or empirical), rounded, at least 1, then
    within `min`..`max` when given. A fixed length (a mean without spread) draws nothing from
    `rng`, so adding a fixed length never shifts the other draws."""
    if length.peaks:
        peak: Peak = length.peaks[_choose(rng, [p.weight for p in length.peaks])]
        value = _component(rng, peak.mean, peak.stddev, peak.median)
    elif length.points:
        value = length.points[_choose(rng, [p.weight for p in length.points])].value
    else:
        assert length.mean is not None
        value = _component(rng, length.mean, length.stddev, length.median)
    if length.min is not None:
        value = max(value, length.min)
    if length.max is not None:
        value = min(value, length.max)
    return max(1, round(value))


def sequence_lengths(rng: np.random.Generator, prompts: Prompts) -> tuple[int, int | None]:
    """(input tokens, max_tokens or None) of one turn: from a `sequence_distribution` pair drawn
    by probability, else from `isl` and `osl`."""
    if prompts.sequence_distribution:
        entry = prompts.sequence_distribution[_choose(rng, [e.probability for e in prompts.sequence_distribution])]
        return draw_length(rng, entry.isl), draw_length(rng, entry.osl)
    return draw_length(rng, prompts.isl), max_tokens(rng, prompts)


def max_tokens(rng: np.random.Generator, prompts: Prompts) -> int | None:
    """A ``max_tokens`` drawn from ``prompts.osl`` (``--osl``/``--osl-stddev``), or None when unset."""
    if prompts.osl is None:
        return None
    return draw_length(rng, prompts.osl)


def turn_delay_ms(rng: np.random.Generator, delay: Delay, ratio: float = 1.0) -> float | None:
    """Think time before a later turn, Normal(delay mean, stddev) clipped at 0, times `ratio`
    (`turn_delay_ratio`); None if both are 0."""
    if delay.mean == 0 and delay.stddev == 0:
        return None
    return max(0.0, float(rng.normal(delay.mean, delay.stddev))) * ratio


def session_id(index: int) -> str:
    """The id given to the ``index``-th conversation when the source names none (AIPerf's form)."""
    return f"session_{index:06d}"
