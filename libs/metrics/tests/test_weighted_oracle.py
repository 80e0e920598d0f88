"""`weighted_stats` against NVIDIA AIPerf 0.13.0's own `compute_time_weighted_stats` (run in its
venv, in a subprocess: AIPerf is never imported here), bit for bit on avg, std, min and max, for
step functions of up to a few thousand pieces (numpy's pairwise sums split past 128 values)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aiperf.metrics import weighted
from aiperf.metrics.weighted import weighted_stats

_AIPERF = """
import json, sys
import numpy as np
import aiperf.analysis.sweepline  # first: its module and sweepline_stats import each other
from aiperf.analysis.sweepline_stats import compute_time_weighted_stats
out = []
for ts, vals, lo, hi in json.load(sys.stdin):
    s = compute_time_weighted_stats(np.array(ts, np.float64), np.array([float.fromhex(v) for v in vals]),
                                    float(lo), float(hi))
    out.append([float(s.avg).hex(), float(s.std).hex(), float(s.min).hex(), float(s.max).hex()])
json.dump(out, sys.stdout)
"""


def _venv() -> Path:
    given = os.environ.get("AIPERF_ORACLE_VENV")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(given) if given else cache / "aiperf-oracle" / "0.13.0"


def _cases() -> list[tuple[np.ndarray, np.ndarray, int, int]]:
    rng = np.random.default_rng(13)
    cases = []
    for size in (1, 2, 7, 8, 9, 127, 128, 129, 300, 1000, 4099):
        for kind in ("rates", "counts", "ties"):
            times = np.cumsum(rng.integers(1, 5_000_000, size)).astype(np.int64)
            if kind == "rates":
                values = rng.lognormal(20, 2, size) * rng.choice([0.0, 1.0], size, p=[0.1, 0.9])
            elif kind == "counts":
                values = rng.integers(0, 64, size).astype(np.float64)
            else:
                values = rng.choice([0.1, 1e9 / 3, 7.25], size)
            lo = int(times[0]) - int(rng.integers(0, 1000))
            hi = int(times[-1]) + int(rng.integers(1, 1000))
            cases.append((times, values, lo, hi))
    return cases


def _pieces(times: np.ndarray, values: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The step function's (value, duration) pieces over [lo, hi] (0 before its first time)."""
    grid = np.unique(np.concatenate([[lo, hi], times[(times > lo) & (times < hi)]]))
    i = np.searchsorted(times, grid[:-1], side="right") - 1
    return np.where(i >= 0, values[np.clip(i, 0, None)], 0.0), np.diff(grid).astype(np.float64)


@pytest.mark.parametrize("block", [7, 1 << 16])
def test_avg_std_min_max_are_aiperfs_bit_for_bit(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    python = _venv() / "bin" / "python"
    if not python.exists():
        pytest.skip(f"AIPerf 0.13.0 oracle venv not found at {python.parent.parent}: run scripts/ci/aiperf-oracle.sh")
    cases = _cases()
    payload = [[t.tolist(), [float(v).hex() for v in vals], lo, hi] for t, vals, lo, hi in cases]
    done = subprocess.run([str(python), "-c", _AIPERF], input=json.dumps(payload), capture_output=True, text=True,
                          timeout=120, check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    theirs = json.loads(done.stdout)
    monkeypatch.setattr(weighted, "BLOCK", block)
    for (times, values, lo, hi), want in zip(cases, theirs, strict=True):
        v, dt = _pieces(times, values, lo, hi)
        got = weighted_stats(v, dt, hi - lo)
        assert [got.avg.hex(), got.std.hex(), got.min.hex(), got.max.hex()] == want, (times.size, lo, hi)
