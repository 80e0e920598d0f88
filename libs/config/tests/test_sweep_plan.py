"""The sweep planner: variations, labels, the run layout, seeds and warmup, and config blocks."""

from __future__ import annotations

import pytest

from aiperf.config import ConfigError, decode_benchmark, normalize
from aiperf.config.sweep import (
    DEFAULT_SEED,
    MultiRun,
    Sweep,
    SweepType,
    apply_values,
    build_plan,
    split_sweep_blocks,
    trial_seed,
    variations,
)


def test_grid_is_every_combination_last_parameter_fastest() -> None:
    got = variations({"concurrency": [1, 2], "isl": [128, 256]}, SweepType.GRID)
    assert [v.label for v in got] == ["concurrency_1__isl_128", "concurrency_1__isl_256",
                                      "concurrency_2__isl_128", "concurrency_2__isl_256"]
    assert got[3].values == {"concurrency": 2, "isl": 256}


def test_zip_pairs_values_and_needs_equal_lengths() -> None:
    got = variations({"phases.profiling.concurrency": [4, 8], "dataset.prompts.isl.mean": [100, 200]},
                     SweepType.ZIP)
    assert [v.label for v in got] == ["concurrency_4__mean_100", "concurrency_8__mean_200"]  # AIPerf's names
    with pytest.raises(ConfigError, match="same number of values"):
        variations({"a": [1, 2], "b": [1]}, SweepType.ZIP)


def test_labels_are_aiperfs_folder_names_and_duplicates_are_refused() -> None:
    assert variations({"request_rate": [2.5, 10.0]}, SweepType.GRID)[1].label == "request_rate_10.0"
    assert variations({"datasets.main.format": ["a/../b"]}, SweepType.GRID)[0].label == "format_ab"
    with pytest.raises(ConfigError, match="twice"):
        variations({"concurrency": [4, 4]}, SweepType.GRID)


def test_plan_is_trial_major_with_cooldowns_and_warmup_in_the_first_trial() -> None:
    sweep = variations({"concurrency": [1, 2]}, SweepType.GRID)
    plan = build_plan(variations=sweep, multi_run=MultiRun(num_runs=2, cooldown_seconds=5.0), sweep_cooldown_s=1.0)
    assert [(r.trial, r.artifact_subdir, r.cooldown_s, r.warmup) for r in plan.runs] == [
        (1, "profile_runs/trial_0001/concurrency_1", 0.0, True),
        (1, "profile_runs/trial_0001/concurrency_2", 1.0, True),
        (2, "profile_runs/trial_0002/concurrency_1", 5.0, False),
        (2, "profile_runs/trial_0002/concurrency_2", 1.0, False),
    ]
    assert [r.trial for r in plan.runs_of(sweep[1])] == [1, 2]
    assert plan.aggregate_subdir(sweep[0]) == "aggregate/concurrency_1"


def test_plan_without_a_sweep() -> None:
    plan = build_plan(variations=[], multi_run=MultiRun(num_runs=3, disable_warmup_after_first=False))
    assert [r.artifact_subdir for r in plan.runs] == [f"profile_runs/trial_000{i}" for i in (1, 2, 3)]
    assert all(r.warmup for r in plan.runs)
    assert plan.aggregate_subdir(None) == "aggregate"
    assert plan.runs_of(None) == plan.runs


def test_aiperf_aliases_name_aiperfs_folders_where_ours_differ() -> None:
    sweep = variations({"concurrency": [1, 2]}, SweepType.GRID)
    assert build_plan(variations=sweep, multi_run=MultiRun(num_runs=1)).aiperf_aliases() == {
        "sweep_aggregate": "aggregate/sweep_aggregate",
        "concurrency_1": "profile_runs/trial_0001/concurrency_1",
        "concurrency_2": "profile_runs/trial_0001/concurrency_2"}
    # several trials of a sweep: AIPerf's REPEATED layout is ours; only its aggregate folder differs
    assert build_plan(variations=sweep, multi_run=MultiRun(num_runs=2)).aiperf_aliases() == {
        "sweep_aggregate": "aggregate/sweep_aggregate"}
    assert build_plan(variations=[], multi_run=MultiRun(num_runs=2)).aiperf_aliases() == {
        "profile_runs/run_0001": "profile_runs/trial_0001", "profile_runs/run_0002": "profile_runs/trial_0002"}


def test_seeds() -> None:
    assert trial_seed(3, None, MultiRun()) == DEFAULT_SEED
    assert trial_seed(3, 7, MultiRun()) == 7
    assert trial_seed(3, 7, MultiRun(vary_seed_per_trial=True)) == 9
    assert trial_seed(1, None, MultiRun(set_consistent_seed=False)) is None


def test_apply_values_sets_paths_in_the_canonical_document() -> None:
    doc, _ = normalize({"model": "m", "profiling": {"type": "concurrency", "concurrency": 2, "requests": 5},
                        "dataset": {"isl": 50}})
    varied = apply_values(doc, {"phases.profiling.concurrency": 8, "dataset.prompts.isl.mean": 99})
    bench = decode_benchmark(varied)
    assert bench.profiling.concurrency == 8 and bench.dataset.prompts.isl.mean == 99
    assert doc["phases"][0]["concurrency"] == 2  # the input is left alone
    defaults = decode_benchmark(apply_values({"models": ["m"]}, {"phases.profiling.requests": 3}))
    assert defaults.profiling.requests == 3
    with pytest.raises(ConfigError, match="no 'nosuch'"):
        apply_values(doc, {"phases.nosuch.concurrency": 1})


def test_config_blocks_are_split_and_validated() -> None:
    body = {"schemaVersion": "2.0", "benchmark": {"model": "m"},
            "sweep": {"type": "zip", "parameters": {"phases.profiling.concurrency": [1, 2]}, "cooldownSeconds": 2},
            "multiRun": {"numRuns": 3, "confidenceLevel": 0.9}}
    rest, sweep, multi = split_sweep_blocks(body, source="f.yaml")
    assert set(rest) == {"schemaVersion", "benchmark"}
    assert sweep == Sweep(type=SweepType.ZIP, parameters={"phases.profiling.concurrency": [1, 2]}, cooldown_seconds=2)
    assert multi == MultiRun(num_runs=3, confidence_level=0.9)
    with pytest.raises(ConfigError, match=r"f.yaml: multi_run.num_runs: .*<= 10"):
        split_sweep_blocks({**body, "multiRun": {"numRuns": 11}}, source="f.yaml")
    with pytest.raises(ConfigError, match="sweep.parameters: a zip sweep needs"):
        split_sweep_blocks({**body, "sweep": {"type": "zip", "parameters": {"a": [1], "b": [1, 2]}}})
