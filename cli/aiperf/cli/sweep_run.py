"""`aiperf profile` with `--num-profile-runs N` and/or a sweep (comma lists on sweepable flags, or
a config file's `sweep:`/`multi_run:` blocks): the plan of `aiperf.config.sweep`, run here.

Every variation's benchmark is built and validated before anything starts (a bad value is one
line, exit 2). Each planned run is then one complete `aiperf profile` run in its own folder
(`LocalExecutor`): the services start and stop once per run. That costs each run its start-up
(printed as `start-up:`; about 1-2 s here) but keeps trials independent (fresh workers,
connections and dataset per run, exactly what a single run measures) and makes a failed run
cost only itself. After the last run each variation's aggregate and, for a sweep, the sweep
aggregate are written and printed. Ctrl+C (exit 130) or a user error (exit 2) in a run ends
the plan; a run that fails otherwise is left out of its aggregate (`failed_runs`) and makes the
exit code 1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.cli.sweep_options import MULTI_RUN_FIELDS, MultiRunFlags, sweep_parameters
from aiperf.config import Benchmark, ConfigError, PhaseKind, Secrets
from aiperf.config.loader import read_document
from aiperf.config.sweep import (
    SAMPLING_TYPES,
    MultiRun,
    Plan,
    PlannedRun,
    RunOutcome,
    SweepType,
    Variation,
    build_plan,
    split_sweep_blocks,
    sweep_variations,
    variations,
)
from aiperf.metrics.multirun import (
    aggregate_csv,
    aggregate_runs,
    aggregate_table,
    sweep_csv,
    sweep_document,
    write_json,
)

EXIT_USER_ERROR = 2
STOPS_THE_PLAN = (EXIT_USER_ERROR, 130)
SUMMARY = "profile_export_aiperf.json"
AGGREGATE = "profile_export_aiperf_aggregate"
SWEEP_AGGREGATE = "aggregate/sweep_aggregate/profile_export_aiperf_sweep"


class LocalExecutor:
    """Runs a planned run as one local `aiperf profile` run (every service a local process)."""

    def __init__(self, *, secrets: Secrets, log_level: str) -> None:
        self._secrets, self._log_level = secrets, log_level

    def execute(self, run: PlannedRun, benchmark: Benchmark) -> RunOutcome:
        """Run it; the summary is read back when the run succeeded."""
        from aiperf.cli.profile import run_profile

        code = run_profile(benchmark, secrets=self._secrets, t0_wall_ns=time.time_ns(), log_level=self._log_level)
        path = Path(benchmark.artifacts.dir) / SUMMARY
        summary = json.loads(path.read_text()) if code == 0 and path.exists() else None
        return RunOutcome(exit_code=code, summary=summary)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepSetup:
    """What the flags and the config file ask for: the plan, and each variation's benchmark
    (key None without a sweep)."""

    plan: Plan
    benchmarks: dict[int | None, Benchmark]
    secrets: Secrets
    artifact_dir: Path


def _multi_run(base: MultiRun | None, flags: MultiRunFlags) -> MultiRun:
    given = {MULTI_RUN_FIELDS[f]: v for f in MULTI_RUN_FIELDS if (v := getattr(flags, f)) is not None}
    try:
        return msgspec.convert({**msgspec.to_builtins(base or MultiRun()), **given}, MultiRun)
    except msgspec.ValidationError as exc:
        field = str(exc).rpartition("$.")[2].rstrip("`")
        flag = {v: k for k, v in MULTI_RUN_FIELDS.items()}.get(field, field)
        value = given.get(field)
        reason = str(exc).partition(" - at ")[0].replace("Expected `int` ", "").replace("Expected `float` ", "")
        raise ConfigError(f"--{flag.replace('_', '-')} {value}: {reason.lower()}") from None


def plan_setup(flags: ProfileFlags, local: LocalFlags, multi: MultiRunFlags, *,
               config_file: str | None) -> SweepSetup:
    """The plan and every benchmark in it, validated; raises `ConfigError` (one line)."""
    sweep_block = multi_block = None
    if config_file is not None:
        _, sweep_block, multi_block = split_sweep_blocks(read_document(config_file), source=config_file)
    try:
        cli_sweep = sweep_parameters(multi.sweep_values)
    except FlagError as exc:
        raise ConfigError(str(exc)) from None
    if cli_sweep and sweep_block is not None:
        raise ConfigError(f"comma lists and the sweep: block of {config_file}: give the sweep one way")
    multi_run = _multi_run(multi_block, multi)
    sweep_type = SweepType(multi.sweep_type or (sweep_block.type if sweep_block else SweepType.GRID))
    if sweep_block is not None and sweep_type is not sweep_block.type and {SweepType.SCENARIOS, *SAMPLING_TYPES} & {
            sweep_type, sweep_block.type}:
        raise ConfigError(f"--sweep-type {sweep_type}: the sweep: block of {config_file} is a {sweep_block.type} sweep")
    cooldown = multi.parameter_sweep_cooldown_seconds
    if cooldown is None:
        cooldown = sweep_block.cooldown_seconds if sweep_block else 0.0
    if cooldown < 0 or multi_run.cooldown_seconds < 0:
        raise ConfigError("cooldown seconds: must be >= 0")
    if cli_sweep:
        planned = variations(cli_sweep, sweep_type)
    elif sweep_block is not None:
        planned = sweep_variations(msgspec.structs.replace(sweep_block, type=sweep_type))
    else:
        planned = []
    benchmarks: dict[int | None, Benchmark] = {}
    secrets = Secrets()
    each: list[Variation | None] = [*planned] or [None]
    for variation in each:
        values = variation.values if variation is not None else {}
        varied = dataclasses.replace(flags, **values) if cli_sweep else flags  # type: ignore[arg-type]
        try:
            built = build_benchmark(varied, local, config_file=config_file,
                                    variation=None if cli_sweep else variation)
        except ConfigError as exc:
            where = f"{variation.label}: " if variation is not None else ""
            raise ConfigError(f"{where}{exc}") from None
        benchmarks[None if variation is None else variation.index] = built.benchmark
        secrets = built.secrets
    first = next(iter(benchmarks.values()))
    plan = build_plan(variations=planned, multi_run=multi_run, sweep_cooldown_s=cooldown, sweep_type=sweep_type,
                      seed=first.random_seed, same_seed=sweep_block.same_seed if sweep_block else True)
    return SweepSetup(plan=plan, benchmarks=benchmarks, secrets=secrets,
                      artifact_dir=Path(first.artifacts.dir).resolve())


def run_benchmark_of(setup: SweepSetup, run: PlannedRun) -> Benchmark:
    """The variation's benchmark as this run needs it: its folder, its seed, warmup or not."""
    base = setup.benchmarks[None if run.variation is None else run.variation.index]
    phases = base.phases if run.warmup else [p for p in base.phases if p.role is not PhaseKind.WARMUP]
    artifacts = msgspec.structs.replace(base.artifacts, dir=str(setup.artifact_dir / run.artifact_subdir))
    return msgspec.structs.replace(base, artifacts=artifacts, phases=phases, random_seed=run.seed)


def _what(run: PlannedRun, plan: Plan) -> str:
    total = plan.multi_run.num_runs
    where = f", {run.variation.label}" if run.variation is not None else ""
    return f"trial {run.trial}/{total}{where}"


def run_sweep(flags: ProfileFlags, local: LocalFlags, multi: MultiRunFlags, *, config_file: str | None,
              log_level: str, auto_plot: bool = False) -> int:
    """Plan, run every run in order, write and print the aggregates (then, with `auto_plot`, plot
    the whole plan's folder once, which never changes the code); returns the exit code."""
    try:
        setup = plan_setup(flags, local, multi, config_file=config_file)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    plan = setup.plan
    executor = LocalExecutor(secrets=setup.secrets, log_level=log_level)
    outcomes: dict[str, RunOutcome] = {}
    for number, run in enumerate(plan.runs, 1):
        if run.cooldown_s > 0:
            print(f"cooldown: {run.cooldown_s:g} s", flush=True)
            try:
                time.sleep(run.cooldown_s)
            except KeyboardInterrupt:  # between runs nothing is in flight: stop here
                print("\ncancelled between runs; no aggregate written", file=sys.stderr)
                return 130
        print(f"\n=== run {number} of {len(plan.runs)}: {_what(run, plan)} -> {run.artifact_subdir}", flush=True)
        outcome = executor.execute(run, run_benchmark_of(setup, run))
        outcomes[run.artifact_subdir] = outcome
        if outcome.exit_code in STOPS_THE_PLAN:
            print(f"stopping: {_what(run, plan)} ended with exit code {outcome.exit_code}", file=sys.stderr)
            return outcome.exit_code
    try:
        write_aggregates(setup, outcomes)
        link_aiperf_layout(setup)
    except OSError as exc:
        print(f"error: cannot write the aggregates in {setup.artifact_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if auto_plot:
        from aiperf.cli.plot import auto_plot as plot_exports

        plot_exports(setup.artifact_dir)
    return 0 if all(o.exit_code == 0 for o in outcomes.values()) else 1


def write_aggregates(setup: SweepSetup, outcomes: dict[str, RunOutcome]) -> None:
    """Each variation's aggregate (json, csv, printed), then the sweep's; raises `OSError`."""
    plan = setup.plan
    confidence = plan.multi_run.confidence_level
    combos: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    each: list[Variation | None] = list(plan.variations) or [None]
    for variation in each:
        runs = [outcomes[r.artifact_subdir].summary for r in plan.runs_of(variation)]
        doc = aggregate_runs(runs, confidence=confidence)
        folder = setup.artifact_dir / plan.aggregate_subdir(variation)
        os.makedirs(folder, exist_ok=True)
        write_json(folder / f"{AGGREGATE}.json", doc)
        (folder / f"{AGGREGATE}.csv").write_text(aggregate_csv(doc))
        title = variation.label if variation is not None else "aggregate"
        print("\n" + aggregate_table(doc, title=title))
        if variation is not None:
            combos.append((variation.label, dict(variation.values), doc))
    print(f"aggregate: {setup.artifact_dir / 'aggregate'}/")
    if not combos:
        return
    sweep = sweep_document(combos, sweep_type=str(plan.sweep_type))
    path = setup.artifact_dir / SWEEP_AGGREGATE
    os.makedirs(path.parent, exist_ok=True)
    write_json(path.with_suffix(".json"), sweep)
    path.with_suffix(".csv").write_text(sweep_csv(sweep))
    print("\n" + sweep_table(sweep))


def link_aiperf_layout(setup: SweepSetup) -> list[str]:
    """Relative symlinks at AIPerf 0.13.0's paths to the folders this plan wrote
    (`Plan.aiperf_aliases`), so scripts written for AIPerf's layout find the same files; an
    alias whose path exists already, or whose folder was not written, is skipped. Returns the
    aliases made; raises `OSError` when one cannot be made."""
    made = []
    for alias, target in setup.plan.aiperf_aliases().items():
        link, folder = setup.artifact_dir / alias, setup.artifact_dir / target
        if link.exists() or link.is_symlink() or not folder.is_dir():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(folder, link.parent), target_is_directory=True)
        made.append(alias)
    return made


def sweep_table(doc: dict[str, Any]) -> str:
    """One line per combination: throughput and p99 latency (mean over trials), Pareto marked."""
    front = {p["label"] for p in doc["pareto_optimal"]}
    lines = [f"sweep ({doc['sweep_type']}, {doc['num_combinations']} combinations; * = Pareto-optimal, "
             "throughput vs p99 latency)"]
    width = max(len(c["label"]) for c in doc["per_combination_metrics"])
    for combo in doc["per_combination_metrics"]:
        thr = combo["metrics"].get("request_throughput", {}).get("avg", {}).get("mean")
        lat = combo["metrics"].get("request_latency", {}).get("p99", {}).get("mean")
        cells = [f"{thr:.3f} req/s" if thr is not None else "-", f"p99 {lat:.3f} ms" if lat is not None else "-"]
        mark = "*" if combo["label"] in front else " "
        lines.append(f"{mark} {combo['label'].ljust(width)}  {cells[0]:>16}  {cells[1]:>18}")
    best = doc["best_configurations"]
    if best:
        lines.append(f"best throughput: {best['best_throughput']['label']}; "
                     f"best p99 latency: {best['best_latency_p99']['label']}")
    return "\n".join(lines)


def wants_plan(multi: MultiRunFlags, config_file: str | None) -> bool:
    """Whether `aiperf profile` runs a plan: a multi-run or sweep flag is given, or the config
    file has a `sweep:` or `multi_run:` block (an unreadable file is the plain path's to report)."""
    if multi.wanted:
        return True
    if config_file is None:
        return False
    try:
        _, sweep, multi_run = split_sweep_blocks(read_document(config_file), source=config_file)
    except ConfigError:
        return True  # a bad block: the plan path reports it
    return sweep is not None or multi_run is not None
