"""`latin_hypercube` and `sobol` sweeps, planned as AIPerf 0.13.0 plans them: one config file
expanded by AIPerf's `config expand` and by ours.

- Where AIPerf's points need no more than numpy (Latin hypercube with `optimization: null`, Sobol
  with `scramble: false`), every variation is the same: folder name, values and benchmark.
- With AIPerf's defaults (`optimization: random-cd`, `scramble: true`: scipy's optimizer and Owen
  scrambling, not built here; `aiperf.config.qmc`), the plans agree on what is checkable: the
  count, the paths, each value's type and bounds, the choices used, and one point per 1/n stratum
  of a real dimension."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from _oracle import Oracle, comparable, expand, find_oracle

from aiperf.cli.main import main

BODY = {"models": ["m"], "endpoint": {"urls": ["http://x:8000"]},
        "datasets": [{"name": "default", "type": "synthetic", "entries": 10,
                      "prompts": {"isl": {"mean": 128}, "osl": {"mean": 16}}}],
        "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 4, "requests": 20}]}
DIMENSIONS = [{"path": "phases.profiling.concurrency", "lo": 1, "hi": 64, "scale": "log", "kind": "int"},
              {"path": "datasets.default.prompts.isl.mean", "lo": 64, "hi": 512},
              {"path": "phases.profiling.requests", "choices": [10, 20, 40]}]


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return find_oracle()


def _both(oracle: Oracle, sweep: dict[str, Any], tmp_path: Path,
          capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"benchmark": BODY, "sweep": {**sweep, "dimensions": DIMENSIONS}}))
    theirs = expand(oracle, path, tmp_path)
    capsys.readouterr()
    code = main(["config", "expand", str(path), "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    ours: list[dict[str, Any]] = json.loads(out.out)["variations"]
    return ours, theirs


@pytest.mark.parametrize("sweep", [
    {"type": "latin_hypercube", "samples": 6, "seed": 7, "optimization": None},
    {"type": "sobol", "samples": 8, "scramble": False},
    {"type": "sobol", "samples": 5, "scramble": False, "labelFormat": "kv"},
], ids=["lhs-vanilla", "sobol-raw", "sobol-raw-not-power-of-two"])
def test_the_points_numpy_can_draw_are_aiperfs(sweep: dict[str, Any], oracle: Oracle, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    ours, theirs = _both(oracle, sweep, tmp_path, capsys)
    assert [v["label"] for v in ours] == [v["dir_name"] for v in theirs]
    assert [v["values"] for v in ours] == [v["values"] for v in theirs]
    for mine, their in zip(ours, theirs, strict=True):
        assert comparable(mine["benchmark"]) == comparable(their["benchmark"]), mine["label"]


@pytest.mark.parametrize("sweep", [
    {"type": "latin_hypercube", "samples": 8, "seed": 3},
    {"type": "sobol", "samples": 8, "seed": 3},
], ids=["lhs-random-cd", "sobol-scrambled"])
def test_aiperfs_default_samplers_are_planned_alike(sweep: dict[str, Any], oracle: Oracle, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    ours, theirs = _both(oracle, sweep, tmp_path, capsys)
    assert len(ours) == len(theirs) == sweep["samples"]
    for plan in ([v["values"] for v in ours], [v["values"] for v in theirs]):
        assert all(list(values) == [d["path"] for d in DIMENSIONS] for values in plan)
        concurrency = [v["phases.profiling.concurrency"] for v in plan]
        assert all(isinstance(c, int) and 1 <= c <= 64 for c in concurrency)
        isl = [v["datasets.default.prompts.isl.mean"] for v in plan]
        assert sorted(math.floor((x - 64) / (512 - 64) * len(plan)) for x in isl) == list(range(len(plan)))
        assert {v["phases.profiling.requests"] for v in plan} <= {10, 20, 40}
    for mine in ours:
        assert comparable(mine["benchmark"])["phases"][0]["concurrency"] == mine["values"]["phases.profiling.concurrency"]
