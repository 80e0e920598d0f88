"""An AIPerfSweep is planned by the same planner as a local sweep."""

from __future__ import annotations

from typing import Any

import pytest

from aiperf.config import ConfigError
from aiperf.crd.model import SWEEP_KIND, decode_spec
from aiperf.kuberun.sweep_plan import (
    RUN_DIGEST_ANNOTATION,
    SWEEP_LABEL,
    benchmark_of,
    child_body,
    child_name,
    is_owned_by,
    plan_digest,
    plan_for,
    plan_of,
    run_benchmark,
    run_digest,
    uid_seed,
)

SPEC: dict[str, Any] = {
    "benchmark": {"models": ["m"], "phases": [{"type": "concurrency", "name": "profiling", "requests": 8}]},
    "sweep": {"type": "zip", "parameters": {"phases.profiling.concurrency": [2, 4],
                                            "datasets.0.prompts.isl.mean": [100, 200]}, "cooldownSeconds": 3,
              "sameSeed": True},
    "multiRun": {"numRuns": 2, "cooldownSeconds": 9},
}


def test_a_sweep_cr_plans_like_a_local_sweep() -> None:
    spec = decode_spec(SPEC, SWEEP_KIND)
    plan = plan_of(spec)
    assert [(r.artifact_subdir, r.cooldown_s, r.seed) for r in plan.runs] == [
        ("profile_runs/trial_0001/concurrency_2__mean_100", 0.0, 42),
        ("profile_runs/trial_0001/concurrency_4__mean_200", 3.0, 42),
        ("profile_runs/trial_0002/concurrency_2__mean_100", 9.0, 42),
        ("profile_runs/trial_0002/concurrency_4__mean_200", 3.0, 42),
    ]
    bench = benchmark_of(spec, plan.variations[1])
    assert bench.profiling.concurrency == 4 and bench.dataset.prompts.isl.mean == 200


def test_variations_derive_their_own_seeds_unless_they_share_one() -> None:
    spec = decode_spec({**SPEC, "sweep": {**SPEC["sweep"], "sameSeed": False}}, SWEEP_KIND)
    seeds = [r.seed for r in plan_of(spec).runs]
    assert seeds[0] == seeds[2] and seeds[1] == seeds[3] and seeds[0] != seeds[1]  # per variation, every trial
    assert 42 not in seeds


def test_a_scenarios_sweep_merges_each_scenario_over_the_base() -> None:
    spec = decode_spec({**SPEC, "sweep": {"type": "scenarios", "runs": [
        {"name": "small", "benchmark": {"phases": [{"name": "profiling", "concurrency": 2}]}},
        {"name": "long", "benchmark": {"dataset": {"prompts": {"isl": {"mean": 900, "median": 700}}}}}]}},
        SWEEP_KIND)
    plan = plan_of(spec)
    assert [v.label for v in plan.variations] == ["small", "long"] and len(plan.runs) == 4
    small, long = (benchmark_of(spec, v) for v in plan.variations)
    assert small.profiling.concurrency == 2 and small.profiling.requests == 8
    isl = long.dataset.prompts.isl
    assert (isl.mean, isl.median, isl.stddev) == (900, 700, 0)


def test_aiperfs_form_of_repeated_runs_plans_trials_of_one_benchmark() -> None:
    spec = decode_spec({**SPEC, "sweep": {"type": "scenarios", "runs": [{"name": "base"}]}}, SWEEP_KIND)
    plan = plan_of(spec)
    assert plan.variations == [] and [r.artifact_subdir for r in plan.runs] == [
        "profile_runs/trial_0001", "profile_runs/trial_0002"]


def test_an_invalid_variation_is_named() -> None:
    spec = decode_spec({**SPEC, "sweep": {"parameters": {"phases.profiling.concurrency": [0]}}}, SWEEP_KIND)
    with pytest.raises(ConfigError, match=r"concurrency_0: phases\[0\].concurrency"):
        benchmark_of(spec, plan_of(spec).variations[0])


def test_an_unseeded_sweep_is_seeded_from_its_uid_and_a_seeded_one_keeps_its_seed() -> None:
    spec = decode_spec(SPEC, SWEEP_KIND)
    first, again = plan_for(spec, "uid-a"), plan_for(spec, "uid-a")
    assert [r.seed for r in first.runs] == [r.seed for r in again.runs] == [uid_seed("uid-a")] * 4
    assert uid_seed("uid-a") != uid_seed("uid-b")
    seeded = decode_spec({**SPEC, "randomSeed": 7}, SWEEP_KIND)
    assert {r.seed for r in plan_for(seeded, "uid-a").runs} == {7}


def test_a_child_is_named_by_variation_and_trial_and_owned_by_the_sweep() -> None:
    raw = {**SPEC, "image": "reg/aiperf/all:1", "ttlSecondsAfterFinished": 9,
           "childMetadata": {"labels": {"team": "perf"}}}
    spec = decode_spec(raw, SWEEP_KIND)
    cr = {"metadata": {"name": "s", "namespace": "bench", "uid": "u-1"}, "spec": raw}
    plan = plan_for(spec, "u-1")
    run = plan.runs[3]
    body = child_body(cr, run, run_benchmark(spec, run))
    meta = body["metadata"]
    assert meta["name"] == child_name("s", run) == "s-v1-t2"
    assert meta["labels"][SWEEP_LABEL] == "s" and is_owned_by(body, "s", "u-1") and not is_owned_by(body, "s", "u-2")
    assert meta["labels"]["team"] == "perf"  # childMetadata
    assert body["spec"]["image"] == "reg/aiperf/all:1" and "ttlSecondsAfterFinished" not in body["spec"]
    assert "sweep" not in body["spec"] and body["spec"]["benchmark"]["random_seed"] == uid_seed("u-1")
    assert body["spec"]["benchmark"]["phases"][0]["concurrency"] == 4
    digests = [run_digest(run_benchmark(spec, r)) for r in plan.runs]
    assert meta["annotations"][RUN_DIGEST_ANNOTATION] == digests[3]
    # Trials repeat their variation with the same seed: one digest per variation.
    by_variation: dict[int, set[str]] = {}
    for r, d in zip(plan.runs, digests, strict=True):
        assert r.variation is not None
        by_variation.setdefault(r.variation.index, set()).add(d)
    assert all(len(d) == 1 for d in by_variation.values()) and len(set(digests)) == len(by_variation)
    # Equal benchmarks give equal digests, whatever order their keys were written in.
    shuffled = {**SPEC, "benchmark": dict(reversed(list(SPEC["benchmark"].items())))}
    replanned = plan_for(decode_spec(shuffled, SWEEP_KIND), "u-1")
    assert plan_digest([run_digest(run_benchmark(spec, r)) for r in replanned.runs]) == plan_digest(digests)
