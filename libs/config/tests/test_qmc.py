"""Quasi-random sweep points (`aiperf.config.qmc`) and the latin_hypercube/sobol sweep blocks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aiperf.config import ConfigError
from aiperf.config.qmc import latin_hypercube, map_unit, sobol
from aiperf.config.sweep import Sweep, decode_block, sweep_variations


def _one_per_slice(points: np.ndarray) -> bool:
    n = len(points)
    return all(sorted(np.floor(points[:, j] * n).astype(int)) == list(range(n)) for j in range(points.shape[1]))


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_a_latin_hypercube_has_one_point_per_stratum_and_repeats_per_seed(seed: int) -> None:
    points = latin_hypercube(16, 3, seed=seed)
    assert points.shape == (16, 3) and ((0 <= points) & (points < 1)).all()
    assert _one_per_slice(points)
    assert np.array_equal(points, latin_hypercube(16, 3, seed=seed))
    assert not np.array_equal(points, latin_hypercube(16, 3, seed=seed + 1))


def test_sobol_starts_at_the_origin_and_balances_powers_of_two() -> None:
    raw = sobol(8, 3, scramble=False)
    assert raw[0].tolist() == [0, 0, 0] and raw[1].tolist() == [0.5, 0.5, 0.5]
    assert raw[:4, 0].tolist() == [0, 0.5, 0.75, 0.25]  # Gray-code order
    for points in (raw, sobol(64, 8, seed=3), sobol(64, 8, seed=4)):
        assert _one_per_slice(points)
    assert np.array_equal(sobol(32, 2, seed=5), sobol(32, 2, seed=5))
    with pytest.raises(ValueError, match="at most 10 dimensions"):
        sobol(4, 11)


def test_a_unit_coordinate_maps_as_aiperf_maps_it() -> None:
    assert map_unit(0.5, lo=10, hi=20) == 15.0
    assert map_unit(0.5, lo=1, hi=100, scale="log") == pytest.approx(10.0)
    assert map_unit(0.999, lo=1, hi=64, scale="log", kind="int") == 64
    assert map_unit(0.0, lo=0.5, hi=1.0, scale="log", kind="int") == 1  # rounding kept within [ceil(lo), floor(hi)]
    assert [map_unit(u, choices=["a", "b", "c"]) for u in (0.0, 0.34, 0.67, 0.9999)] == ["a", "b", "c", "c"]


def _sweep(**block: Any) -> Sweep:
    sweep: Sweep = decode_block(block, Sweep, "sweep", "")
    return sweep


def test_a_sampled_sweep_has_one_variation_per_sample_labelled_like_a_grid() -> None:
    sweep = _sweep(type="sobol", samples=4, scramble=False, dimensions=[
        {"path": "phases.profiling.concurrency", "lo": 1, "hi": 64, "scale": "log", "kind": "int"},
        {"path": "phases.profiling.requests", "choices": [10, 20]}], labelFormat="kv")
    found = sweep_variations(sweep)
    assert [v.values for v in found] == [
        {"phases.profiling.concurrency": 1, "phases.profiling.requests": 10},
        {"phases.profiling.concurrency": 8, "phases.profiling.requests": 20},
        {"phases.profiling.concurrency": 23, "phases.profiling.requests": 10},
        {"phases.profiling.concurrency": 3, "phases.profiling.requests": 20}]
    assert found[1].label == "concurrency_8__requests_20"


def test_repeated_points_get_their_own_folders() -> None:
    sweep = _sweep(type="latin_hypercube", samples=6, seed=1, dimensions=[{"path": "rate", "choices": [5, 10]}])
    labels = [v.label for v in sweep_variations(sweep)]
    assert sorted(labels) == ["rate_10", "rate_10_2", "rate_10_3", "rate_5", "rate_5_2", "rate_5_3"]


@pytest.mark.parametrize(("block", "message"), [
    ({"type": "sobol", "samples": 4}, "a sobol sweep needs samples and dimensions"),
    ({"type": "latin_hypercube", "samples": 4, "dimensions": [{"path": "a.b", "lo": 2, "hi": 1}]},
     "hi (1) must be above lo (2)"),
    ({"type": "sobol", "samples": 4, "dimensions": [{"path": "a.b", "lo": 0, "hi": 1, "scale": "log"}]},
     "a log scale needs lo > 0"),
    ({"type": "sobol", "samples": 4, "dimensions": [{"path": "a.b", "lo": 0, "hi": 1, "choices": [1]}]},
     "give either lo and hi, or choices"),
    ({"type": "sobol", "samples": 4, "dimensions": [{"path": "a.b", "choices": [1]}, {"path": "a.b", "choices": [2]}]},
     "each path once"),
    ({"type": "latin_hypercube", "samples": 4, "scramble": False, "dimensions": [{"path": "a", "choices": [1]}]},
     "sweep.scramble: only for a sobol sweep"),
    ({"type": "grid", "parameters": {"concurrency": [1]}, "samples": 4}, "only a latin_hypercube or sobol sweep"),
    ({"type": "sobol", "samples": 4, "dimensions": [{"path": f"p.d{i}", "choices": [1]} for i in range(11)]},
     "a sobol sweep of more than 10 dimensions is not built"),
    ({"type": "sobol", "samples": 4, "dimensions": [{"path": "variables.x", "choices": [1]}]}, "sweeping a variable"),
    ({"type": "adaptive_search"}, "sweep.type: adaptive_search: not supported"),
])
def test_bad_sampled_sweeps_fail_with_one_line(block: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _sweep(**block)
    assert message in str(info.value) and "\n" not in str(info.value)
