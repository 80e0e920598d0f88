"""`block_stats`: numpy's mean, min, max, sum, std and linear percentiles, bit for bit, from blocks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from aiperf.metrics import PERCENTILES
from aiperf.metrics.exact import array_blocks, block_stats, leaf_sizes, pairwise_sum

SCALES = (1.0, 1e-6, 1.0 / 1_000_000, 1e-3, 1.0 / 1024, 1e-9, 2.5)


def _numpy(raw: np.ndarray, scale: float) -> tuple[object, ...] | None:
    """What `MetricStats.of_values` computes on the column (`Aggregator.column` + NaN filter)."""
    with np.errstate(all="ignore"):
        values = np.asarray(raw, dtype=np.float64) * scale
        values = values[~np.isnan(values)]
        if not values.size:
            return None
        pct = np.percentile(values, PERCENTILES)
        return (int(values.size), float(np.mean(values)), float(np.min(values)), float(np.max(values)),
                float(np.sum(values)), tuple(float(p) for p in pct), float(np.std(values)))


def _ours(raw: np.ndarray, scale: float, block: int) -> tuple[object, ...] | None:
    got = block_stats(lambda: array_blocks(raw, block), scale, PERCENTILES)
    if got is None:
        return None
    return (got.count, got.avg, got.min, got.max, got.sum, got.percentiles, got.std)



def _bits(t: tuple[object, ...] | None) -> object:
    if t is None:
        return None
    flat: list[float] = []
    for x in t:
        flat.extend(x if isinstance(x, tuple) else [x])  # type: ignore[arg-type]
    return np.asarray(flat, dtype=np.float64).view(np.uint64).tolist()


uint32_columns = hnp.arrays(np.uint32, st.integers(0, 3000),
                            elements=st.one_of(st.integers(0, 2**32 - 1), st.integers(0, 3), st.just(0)))
float_columns = hnp.arrays(np.float64, st.integers(0, 3000), elements=st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.floats(-1e7, 1e9, allow_nan=False), st.sampled_from([0.0, -0.0, 1.0, np.nan])))


@settings(max_examples=100, deadline=None)
@given(raw=uint32_columns, scale=st.sampled_from(SCALES), block=st.integers(16, 400))
@example(raw=np.zeros(129, np.uint32), scale=1e-6, block=1)
@example(raw=np.arange(1000, dtype=np.uint32), scale=1e-6, block=7)
def test_uint32_columns_equal_numpy_bit_for_bit(raw: np.ndarray, scale: float, block: int) -> None:
    assert _bits(_ours(raw, scale, block)) == _bits(_numpy(raw, scale))


@settings(max_examples=100, deadline=None)
@given(raw=float_columns, scale=st.sampled_from(SCALES), block=st.integers(16, 400))
@example(raw=np.array([0.0, -0.0] * 70), scale=1.0, block=3)  # -0.0: computed by numpy itself
@example(raw=np.array([np.inf, 1.0, -np.inf] * 50), scale=1e-6, block=5)
def test_float_columns_equal_numpy_bit_for_bit(raw: np.ndarray, scale: float, block: int) -> None:
    assert _bits(_ours(raw, scale, block)) == _bits(_numpy(raw, scale))


@pytest.mark.parametrize("kind", ["uint32", "mostly_zero", "float"])
def test_long_columns_equal_numpy_bit_for_bit(kind: str) -> None:
    """A long run's shape: a million chunk gaps, most of them 0 (chunks read together), blocks of
    the production size and of an odd one."""
    rng = np.random.default_rng(7)
    n = 1_000_003
    if kind == "uint32":
        raw = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    elif kind == "mostly_zero":
        raw = ((rng.integers(0, 8, n) == 0) * rng.integers(0, 10**7, n)).astype(np.uint32)
    else:
        raw = rng.standard_normal(n) * 1e6
        raw[rng.random(n) < 0.001] = np.nan
    for block in (1 << 16, 12_345):
        assert _bits(_ours(raw, 1e-6, block)) == _bits(_numpy(raw, 1e-6))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1), block=st.integers(1, 3000))
def test_pairwise_sum_is_numpys(n: int, seed: int, block: int) -> None:
    """The tree of `np.add.reduce` over a contiguous float64 array, whatever the block size."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n)
    assert pairwise_sum(array_blocks(a, block), n) == float(np.add.reduce(a))
    assert sum(leaf_sizes(n)) == n


def test_empty_and_all_nan_give_none() -> None:
    assert _ours(np.zeros(0, np.uint32), 1.0, 10) is None
    assert _ours(np.full(5, np.nan), 1.0, 2) is None


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.lists(st.one_of(st.integers(0, 2**32 - 1), st.floats(-1e6, 1e10, allow_nan=False)),
                              max_size=70), min_size=1, max_size=40))
def test_aggregator_chunk_gap_stats_are_numpys(gaps: list[list[float]]) -> None:
    """The summary's inter_chunk_latency (blocks) equals `of_values` on the whole column."""
    from aiperf.messages import MetricRecord, Phase
    from aiperf.metrics import Aggregator, MetricStats

    agg = Aggregator()
    for g in gaps:
        agg.add(MetricRecord(phase=Phase.PROFILING, credit_num=0, worker_id="w", conversation_id="c",
                             metrics={"inter_chunk_latency": [float(x) for x in g], "request_latency": 1.0}))
    got = agg.summary(benchmark_duration_s=1.0).get("inter_chunk_latency")
    values = agg.column("inter_chunk_latency")
    values = values[~np.isnan(values)]
    assert got == (MetricStats.of_values("inter_chunk_latency", values) if values.size else None)
