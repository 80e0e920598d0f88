"""Student-t intervals: textbook values, and properties over arbitrary samples (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.metrics.confidence import interval, t_cdf, t_critical

# Two-sided critical values from a t table (scipy.stats.t.ppf((1 + conf) / 2, df), 15 digits).
TABLE = [
    (0.95, 1, 12.706204736174707),
    (0.95, 2, 4.302652729911275),
    (0.95, 4, 2.7764451051977987),
    (0.95, 10, 2.2281388519649385),
    (0.99, 5, 4.032142983557536),
    (0.90, 30, 1.6972608943617378),
    (0.95, 1_000_000, 1.9599663568),
]


@pytest.mark.parametrize(("confidence", "df", "expected"), TABLE)
def test_t_critical_matches_the_table(confidence: float, df: int, expected: float) -> None:
    assert t_critical(confidence, df) == pytest.approx(expected, rel=1e-8)


def test_textbook_interval() -> None:
    # 10, 12, 14: mean 12, s = 2, se = 2 / sqrt(3), t(0.975, 2) = 4.3027 -> 12 +- 4.9683.
    got = interval([10.0, 12.0, 14.0], 0.95)
    assert (got.mean, got.std, got.min, got.max) == (12.0, 2.0, 10.0, 14.0)
    assert got.se == pytest.approx(2 / math.sqrt(3))
    assert got.cv == pytest.approx(2 / 12)
    assert got.ci_low == pytest.approx(7.0317, abs=1e-4)
    assert got.ci_high == pytest.approx(16.9683, abs=1e-4)


def test_one_run_has_no_interval_width() -> None:
    got = interval([5.0], 0.95)
    assert (got.ci_low, got.ci_high, got.std, got.t_critical) == (5.0, 5.0, 0.0, None)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 1.5])
def test_confidence_out_of_range_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        t_critical(bad, 3)


def test_coverage_of_normal_samples_is_the_confidence() -> None:
    rng = np.random.default_rng(7)
    samples = rng.normal(10.0, 3.0, size=(4000, 4))
    covered = sum(interval(list(row), 0.95).ci_low <= 10.0 <= interval(list(row), 0.95).ci_high for row in samples)
    # Binomial(4000, 0.95): sd 0.0034, so 0.95 +- 0.015 is over 4 sd.
    assert abs(covered / 4000 - 0.95) < 0.015


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.5, max_value=0.999), st.integers(min_value=1, max_value=500))
def test_quantile_inverts_the_cdf(confidence: float, df: int) -> None:
    t = t_critical(confidence, df)
    assert t > 0
    assert t_cdf(t, df) == pytest.approx((1 + confidence) / 2, abs=1e-9)
    assert t_cdf(-t, df) == pytest.approx((1 - confidence) / 2, abs=1e-9)
    assert t_critical(confidence, df + 1) < t  # more data, narrower


samples = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=2, max_size=30)


@settings(max_examples=200, deadline=None)
@given(samples, st.floats(min_value=0.5, max_value=0.99))
def test_interval_is_centered_and_grows_with_confidence(values: list[float], confidence: float) -> None:
    got = interval(values, confidence)
    tol = 1e-9 * max(1.0, max(abs(v) for v in values))
    assert got.min - tol <= got.mean <= got.max + tol
    assert got.ci_low <= got.mean + tol and got.mean - tol <= got.ci_high
    assert (got.mean - got.ci_low) == pytest.approx(got.ci_high - got.mean, abs=tol)
    wider = interval(values, (confidence + 1) / 2)
    assert wider.ci_high - wider.ci_low >= got.ci_high - got.ci_low - tol
    assert got.std == pytest.approx(float(np.std(values, ddof=1)), rel=1e-9, abs=tol)
