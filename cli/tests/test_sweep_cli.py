"""`aiperf profile` multi-run and sweep flags, and `aiperf config expand`: what the plan holds,
and one-line errors before anything starts (no server needed: every error here comes first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiperf.cli.main import main
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.cli.sweep_options import SWEEPABLE, MultiRunFlags, prepare_profile_argv, sweep_parameters
from aiperf.cli.sweep_run import link_aiperf_layout, plan_setup, run_benchmark_of, wants_plan
from aiperf.config import ConfigError, PhaseKind, PoissonPhase

SWEEP_YAML = """\
schemaVersion: "2.0"
benchmark:
  model: m
  phases:
    - {name: warmup, type: concurrency, concurrency: 1, requests: 2}
    - {name: profiling, type: concurrency, concurrency: 1, requests: 5}
sweep:
  type: zip
  parameters: {phases.profiling.concurrency: [2, 4], dataset.prompts.isl.mean: [64, 128]}
  cooldown_seconds: 1.5
  same_seed: true
multi_run: {num_runs: 3, cooldown_seconds: 2}
"""


def test_comma_lists_become_sweep_values() -> None:
    argv = ["profile", "--model", "m", "--concurrency", "4,8", "--isl=100,200", "--request-rate", "5"]
    assert prepare_profile_argv(argv) == ["profile", "--model", "m", "--sweep-values", "concurrency=4,8",
                                          "--sweep-values", "isl=100,200", "--request-rate", "5"]
    assert sweep_parameters(["concurrency=4,8", "request_rate=2.5,5"]) == {"concurrency": [4, 8],
                                                                            "request_rate": [2.5, 5.0]}
    with pytest.raises(FlagError, match=r"--concurrency '4,x': 'x' is not an integer"):
        prepare_profile_argv(["profile", "--concurrency", "4,x"])
    with pytest.raises(FlagError, match="swept twice"):
        prepare_profile_argv(["profile", "--isl", "1,2", "--prompt-input-tokens-mean", "3,4"])


def test_every_sweepable_spelling_is_a_profile_flag() -> None:
    from dataclasses import fields

    names = {f.name for f in fields(ProfileFlags)}
    assert {field for field, _ in SWEEPABLE.values()} <= names


def test_a_cli_sweep_plans_each_variation_with_the_flag_semantics() -> None:
    multi = MultiRunFlags(num_profile_runs=2, sweep_values=["request_rate=2,4"], parameter_sweep_cooldown_seconds=1)
    setup = plan_setup(ProfileFlags(model=["m"], warmup_request_count=3), LocalFlags(ui="none", artifact_dir="/tmp/x"),
                       multi, config_file=None)
    assert [v.label for v in setup.plan.variations] == ["request_rate_2.0", "request_rate_4.0"]
    phases = [setup.benchmarks[i].profiling for i in (0, 1)]
    assert all(isinstance(p, PoissonPhase) for p in phases)  # --request-rate makes an open loop
    assert [p.rate for p in phases if isinstance(p, PoissonPhase)] == [2.0, 4.0]
    first, later = setup.plan.runs[0], setup.plan.runs[2]
    assert run_benchmark_of(setup, first).warmup is not None
    second = run_benchmark_of(setup, later)
    assert second.warmup is None and second.random_seed == 42
    assert second.artifacts.dir == "/tmp/x/profile_runs/trial_0002/request_rate_2.0"


def test_aiperfs_folders_link_to_ours_after_a_sweep(tmp_path: Path) -> None:
    """AIPerf 0.13.0 writes a one-trial sweep's runs in `<label>/` and its aggregate in
    `sweep_aggregate/`: links there reach our folders (relative, so the tree can move); a path
    that exists already and a folder never written are left alone."""
    multi = MultiRunFlags(sweep_values=["concurrency=1,2"])
    setup = plan_setup(ProfileFlags(model=["m"]), LocalFlags(ui="none", artifact_dir=str(tmp_path)), multi,
                       config_file=None)
    for run in setup.plan.runs:
        (tmp_path / run.artifact_subdir).mkdir(parents=True)
        (tmp_path / run.artifact_subdir / "profile_export_aiperf.json").write_text(run.artifact_subdir)
    (tmp_path / "concurrency_2").mkdir()  # something of the user's: kept
    assert link_aiperf_layout(setup) == ["concurrency_1"]  # no aggregate folder was written
    assert (tmp_path / "concurrency_1" / "profile_export_aiperf.json").read_text() == \
        "profile_runs/trial_0001/concurrency_1"
    assert not Path((tmp_path / "concurrency_1").readlink()).is_absolute()
    assert not (tmp_path / "concurrency_2").is_symlink() and not (tmp_path / "sweep_aggregate").exists()


def test_a_config_sweep_and_flags_combine(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP_YAML)
    assert wants_plan(MultiRunFlags(), str(path))
    setup = plan_setup(ProfileFlags(random_seed=5), LocalFlags(ui="none", artifact_dir=str(tmp_path)),
                       MultiRunFlags(num_profile_runs=2, vary_seed_per_trial=True), config_file=str(path))
    plan = setup.plan
    assert plan.multi_run.num_runs == 2 and plan.multi_run.cooldown_seconds == 2  # the flag wins, the rest stays
    assert [v.label for v in plan.variations] == ["concurrency_2__mean_64", "concurrency_4__mean_128"]
    assert [(r.cooldown_s, r.seed) for r in plan.runs] == [(0.0, 5), (1.5, 5), (2.0, 6), (1.5, 6)]
    bench = setup.benchmarks[1]
    assert bench.profiling.concurrency == 4 and bench.dataset.prompts.isl.mean == 128
    assert [p.role for p in run_benchmark_of(setup, plan.runs[3]).phases] == [PhaseKind.PROFILING]
    with pytest.raises(ConfigError, match="give the sweep one way"):
        plan_setup(ProfileFlags(), LocalFlags(ui="none"), MultiRunFlags(sweep_values=["concurrency=1,2"]),
                   config_file=str(path))


@pytest.mark.parametrize(("argv", "message"), [
    (["--num-profile-runs", "11"], "--num-profile-runs 11: "),
    (["--confidence-level", "1.5"], "--confidence-level 1.5: "),
    (["--concurrency", "1,2", "--isl", "5,6,7", "--sweep-type", "zip"], "same number of values"),
    (["--concurrency", "1,0"], "concurrency_0: --concurrency 0: "),
    (["--concurrency", "2,2"], "twice"),
])
def test_bad_multi_run_flags_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    code = main(["profile", "--model", "m", "--url", "http://127.0.0.1:9", "--ui", "none",
                 "--artifact-dir", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "profile_runs").exists()


def test_config_expand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP_YAML)
    assert main(["config", "expand", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("2 variation(s) (zip), 3 trial(s) each, 6 run(s)")
    assert out[1:] == ["  concurrency_2__mean_64: phases.profiling.concurrency=2, dataset.prompts.isl.mean=64",
                       "  concurrency_4__mean_128: phases.profiling.concurrency=4, dataset.prompts.isl.mean=128"]
    assert main(["config", "expand", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["variations"][1]["runs"][2] == "profile_runs/trial_0003/concurrency_4__mean_128"
    assert doc["variations"][1]["benchmark"]["phases"][1]["concurrency"] == 4
    assert main(["config", "validate", str(path)]) == 0
    path.write_text(SWEEP_YAML.replace("[64, 128]", "[64, 0]"))
    assert main(["config", "expand", str(path)]) == 2
    assert "concurrency_4__mean_0: " in capsys.readouterr().err


def test_a_sampled_sweep_plans_its_points_and_keeps_its_type(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("benchmark: {model: m, profiling: {type: concurrency, concurrency: 2, requests: 10}}\n"
                    "sweep: {type: sobol, samples: 4, scramble: false, dimensions: "
                    "[{path: phases.profiling.concurrency, lo: 1, hi: 64, scale: log, kind: int}]}\n")
    setup = plan_setup(ProfileFlags(), LocalFlags(ui="none", artifact_dir=str(tmp_path)), MultiRunFlags(),
                       config_file=str(path))
    assert [v.label for v in setup.plan.variations] == ["concurrency_1", "concurrency_8", "concurrency_23",
                                                         "concurrency_3"]
    assert [setup.benchmarks[i].profiling.concurrency for i in range(4)] == [1, 8, 23, 3]
    with pytest.raises(ConfigError, match="--sweep-type zip: the sweep: block of .* is a sobol sweep"):
        plan_setup(ProfileFlags(), LocalFlags(ui="none"), MultiRunFlags(sweep_type="zip"), config_file=str(path))
