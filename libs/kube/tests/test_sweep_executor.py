"""An AIPerfSweep is planned by the same planner as a local sweep."""

from __future__ import annotations

import msgspec
import pytest

from aiperf.config import ConfigError
from aiperf.config.sweep import RunExecutor
from aiperf.kube.crd_model import AIPerfSweepSpec
from aiperf.kube.sweep_executor import ChildJobExecutor, benchmark_of, plan_of

SPEC = {
    "benchmark": {"models": ["m"], "phases": [{"type": "concurrency", "name": "profiling", "requests": 8}]},
    "sweep": {"type": "zip", "parameters": {"phases.profiling.concurrency": [2, 4],
                                            "datasets.0.prompts.isl.mean": [100, 200]}, "cooldownSeconds": 3},
    "multiRun": {"numRuns": 2, "cooldownSeconds": 9},
}


def test_a_sweep_cr_plans_like_a_local_sweep() -> None:
    spec = msgspec.convert(SPEC, AIPerfSweepSpec)
    plan = plan_of(spec)
    assert [(r.artifact_subdir, r.cooldown_s, r.seed) for r in plan.runs] == [
        ("profile_runs/trial_0001/concurrency_2_isl_100", 0.0, 42),
        ("profile_runs/trial_0001/concurrency_4_isl_200", 3.0, 42),
        ("profile_runs/trial_0002/concurrency_2_isl_100", 9.0, 42),
        ("profile_runs/trial_0002/concurrency_4_isl_200", 3.0, 42),
    ]
    bench = benchmark_of(spec, plan.variations[1])
    assert bench.profiling.concurrency == 4 and bench.dataset.prompts.isl.mean == 200


def test_an_invalid_variation_is_named() -> None:
    spec = msgspec.convert({**SPEC, "sweep": {"parameters": {"phases.profiling.concurrency": [0]}}}, AIPerfSweepSpec)
    with pytest.raises(ConfigError, match=r"concurrency_0: phases\[0\].concurrency"):
        benchmark_of(spec, plan_of(spec).variations[0])


def test_child_job_executor_is_a_run_executor_stub() -> None:
    spec = msgspec.convert(SPEC, AIPerfSweepSpec)
    plan = plan_of(spec)
    executor: RunExecutor = ChildJobExecutor(namespace="bench", sweep_name="s")
    with pytest.raises(NotImplementedError, match="not implemented yet"):
        executor.execute(plan.runs[0], benchmark_of(spec, plan.variations[0]))
