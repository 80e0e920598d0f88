"""Length and delay samplers shared by synthetic and file datasets."""

from __future__ import annotations

import numpy as np

from aiperf.dataset.options import DatasetOptions


def positive_int(rng: np.random.Generator, mean: float, stddev: float) -> int:
    """``round(Normal(mean, stddev))`` clipped to at least 1; ``round(mean)`` (no draw) when stddev is 0."""
    value = float(rng.normal(mean, stddev)) if stddev > 0 else mean
    return max(1, round(value))


def max_tokens(rng: np.random.Generator, options: DatasetOptions) -> int | None:
    """A ``max_tokens`` drawn from ``--osl``/``--osl-stddev``, or None when ``--osl`` is unset."""
    if options.osl is None:
        return None
    return positive_int(rng, options.osl, options.osl_stddev)


def turn_delay_ms(rng: np.random.Generator, options: DatasetOptions) -> float | None:
    """Think time before a later turn, Normal(delay mean, stddev) clipped at 0; None if both are 0."""
    mean, stddev = options.conversation_turn_delay_mean, options.conversation_turn_delay_stddev
    if mean == 0 and stddev == 0:
        return None
    return max(0.0, float(rng.normal(mean, stddev)))


def session_id(index: int) -> str:
    """The id given to the ``index``-th conversation when the source names none (AIPerf's form)."""
    return f"session_{index:06d}"
