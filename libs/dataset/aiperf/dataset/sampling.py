"""Length and delay samplers shared by synthetic and file datasets."""

from __future__ import annotations

import numpy as np

from aiperf.config import Delay, Prompts


def positive_int(rng: np.random.Generator, mean: float, stddev: float) -> int:
    """``round(Normal(mean, stddev))`` clipped to at least 1; ``round(mean)`` (no draw) when stddev is 0."""
    value = float(rng.normal(mean, stddev)) if stddev > 0 else mean
    return max(1, round(value))


def max_tokens(rng: np.random.Generator, prompts: Prompts) -> int | None:
    """A ``max_tokens`` drawn from ``prompts.osl`` (``--osl``/``--osl-stddev``), or None when unset."""
    if prompts.osl is None:
        return None
    return positive_int(rng, prompts.osl.mean, prompts.osl.stddev)


def turn_delay_ms(rng: np.random.Generator, delay: Delay) -> float | None:
    """Think time before a later turn, Normal(delay mean, stddev) clipped at 0; None if both are 0."""
    if delay.mean == 0 and delay.stddev == 0:
        return None
    return max(0.0, float(rng.normal(delay.mean, delay.stddev)))


def session_id(index: int) -> str:
    """The id given to the ``index``-th conversation when the source names none (AIPerf's form)."""
    return f"session_{index:06d}"
