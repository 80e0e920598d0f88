"""The cluster side of the one sweep planner (`aiperf.config.sweep`): an AIPerfSweep's plan, each
variation's benchmark, and the executor that runs a planned run as a child AIPerfJob.

`ChildJobExecutor` is a stub today: the operator does not reconcile AIPerfSweeps yet, so it
raises `NotImplementedError`. `plan_of` and `benchmark_of` are what it (and the operator) build
on, the same plan a local `aiperf profile` sweep runs.
"""

from __future__ import annotations

import msgspec

from aiperf.config import Benchmark, decode_benchmark
from aiperf.config.sweep import (
    MultiRun,
    Plan,
    PlannedRun,
    RunOutcome,
    Variation,
    apply_values,
    build_plan,
    variations,
)
from aiperf.kube.crd_model import AIPerfSweepSpec

__all__ = ["ChildJobExecutor", "benchmark_of", "plan_of"]


def plan_of(spec: AIPerfSweepSpec) -> Plan:
    """The runs of the sweep `spec`: its variations times `multiRun.numRuns` trials, with its
    cooldowns, seeded from `benchmark.random_seed` (42 when unset)."""
    multi = spec.multi_run
    multi_run = MultiRun(num_runs=multi.num_runs, cooldown_seconds=multi.cooldown_seconds) if multi else MultiRun()
    return build_plan(variations=variations(spec.sweep.parameters, spec.sweep.type), multi_run=multi_run,
                      sweep_cooldown_s=spec.sweep.cooldown_seconds, sweep_type=spec.sweep.type,
                      seed=spec.benchmark.random_seed)


def benchmark_of(spec: AIPerfSweepSpec, variation: Variation) -> Benchmark:
    """`spec.benchmark` with the variation's values set; raises `aiperf.config.ConfigError`
    naming the variation when the result is not a valid benchmark."""
    return decode_benchmark(apply_values(msgspec.to_builtins(spec.benchmark), variation.values),
                            source=variation.label)


class ChildJobExecutor:
    """Runs a planned run as a child AIPerfJob of the sweep (not yet implemented)."""

    def __init__(self, *, namespace: str, sweep_name: str) -> None:
        self.namespace, self.sweep_name = namespace, sweep_name

    def execute(self, run: PlannedRun, benchmark: Benchmark) -> RunOutcome:
        """Not yet: the operator's AIPerfSweep reconciler comes later."""
        raise NotImplementedError(f"AIPerfSweep {self.namespace}/{self.sweep_name}: child-job execution of "
                                  f"{run.artifact_subdir} is not implemented yet")
