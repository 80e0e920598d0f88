"""The one planner of sweeps and repeated runs, for local runs and the cluster alike.

A sweep varies parameters of a benchmark: `parameters` maps a key to the values it takes (a
dotted path into the benchmark document, `phases.profiling.concurrency`, for config files and
AIPerfSweep CRs; a flag's field name, `concurrency`, for comma lists on the command line).
`variations` expands them (`grid`: every combination, in the order the parameters are given,
the last one varying fastest; `zip`: the i-th value of each). `build_plan` lays the runs out:
trial-major (every variation of trial 1, then of trial 2, ...), each run in
`profile_runs/trial_000N[/<label>]` and each variation's aggregate in `aggregate[/<label>]`
(AIPerf 0.13's layout). A `RunExecutor` runs one planned run: locally
(`aiperf.cli.sweep_run.LocalExecutor`) or as a Kubernetes child job
(`aiperf.kuberun.sweeps.ChildJobExecutor`).

`Sweep` and `MultiRun` are the `sweep:` and `multi_run:` blocks of an AIPerf config v2 file
(snake_case); the CR's `spec.sweep` (`aiperf.crd.model.SweepSpec`) has the same fields in
camelCase and shares `SweepType`.
"""

from __future__ import annotations

import copy
import enum
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import msgspec
from msgspec import Meta

from aiperf.config.benchmark import Benchmark
from aiperf.config.loader import ConfigError

__all__ = [
    "DEFAULT_SEED", "MultiRun", "Plan", "PlannedRun", "RunExecutor", "RunOutcome", "Sweep", "SweepType",
    "Variation", "apply_values", "build_plan", "label_of", "split_sweep_blocks", "trial_seed", "variations",
]

DEFAULT_SEED = 42
"""The seed of every trial when none is given and `set_consistent_seed` is on (AIPerf's)."""


class SweepType(enum.StrEnum):
    """`grid`: every combination of the parameters' values; `zip`: the i-th value of each."""

    GRID = "grid"
    ZIP = "zip"


SweepValue = int | float
SweepKey = Annotated[str, Meta(pattern=r"^[a-z_][a-z0-9_]*(\.[A-Za-z0-9_-]+)*$", max_length=256)]


class _Block(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the envelope blocks: immutable, unknown fields are an error."""


class Sweep(_Block, frozen=True, kw_only=True):
    """A config file's `sweep:` block: `parameters` (dotted path -> values), `type`, and the
    pause between variations."""

    type: SweepType = SweepType.GRID
    parameters: Annotated[dict[SweepKey, Annotated[list[SweepValue], Meta(min_length=1, max_length=64)]],
                          Meta(min_length=1, max_length=8)]
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0

    def __post_init__(self) -> None:
        if self.type is SweepType.ZIP and len({len(v) for v in self.parameters.values()}) > 1:
            raise ValueError("parameters: a zip sweep needs the same number of values for every parameter")


class MultiRun(_Block, frozen=True, kw_only=True):
    """A config file's `multi_run:` block (and the `--num-profile-runs` family of flags)."""

    num_runs: Annotated[int, Meta(ge=1, le=10)] = 1
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0
    confidence_level: Annotated[float, Meta(gt=0, lt=1)] = 0.95
    disable_warmup_after_first: bool = True
    set_consistent_seed: bool = True
    vary_seed_per_trial: bool = False


@dataclass(frozen=True, kw_only=True)
class Variation:
    """One combination of parameter values; `label` names its folders (`concurrency_16`)."""

    index: int
    label: str
    values: dict[str, SweepValue]


@dataclass(frozen=True, kw_only=True)
class PlannedRun:
    """One run of a plan: trial `trial` (1-based) of `variation` (None without a sweep), its
    results in `artifact_subdir` (relative to the plan's artifact dir), after a pause of
    `cooldown_s`; `warmup` False drops the benchmark's warmup phase."""

    trial: int
    variation: Variation | None
    artifact_subdir: str
    cooldown_s: float
    warmup: bool
    seed: int | None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Every run, in execution order, and where each variation's aggregate goes."""

    runs: list[PlannedRun]
    variations: list[Variation]
    sweep_type: SweepType
    multi_run: MultiRun

    def aggregate_subdir(self, variation: Variation | None) -> str:
        """`aggregate/<label>` (a sweep) or `aggregate` (repeated runs of one benchmark)."""
        return "aggregate" if variation is None else f"aggregate/{variation.label}"

    def runs_of(self, variation: Variation | None) -> list[PlannedRun]:
        """The trials of `variation`, in trial order."""
        return [r for r in self.runs if r.variation == variation]


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What one executed run left: its exit code and its summary document (None when it wrote
    none)."""

    exit_code: int
    summary: dict[str, Any] | None


class RunExecutor(Protocol):
    """Runs one planned run of `benchmark` (already varied, seeded and pointed at the run's
    artifact folder) to completion."""

    def execute(self, run: PlannedRun, benchmark: Benchmark) -> RunOutcome:
        """Run it and report what it left; raises only for what ends the whole plan."""
        ...


def _name(key: str) -> str:
    parts = key.split(".")
    while len(parts) > 1 and parts[-1] in ("mean", "stddev", "value"):
        parts.pop()
    return parts[-1]


def _text(value: SweepValue) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def label_of(values: Mapping[str, SweepValue]) -> str:
    """`concurrency_16`, `concurrency_16_isl_128`: each key's last meaningful segment and value."""
    return "_".join(f"{_name(k)}_{_text(v)}" for k, v in values.items())


def variations(parameters: Mapping[str, Sequence[SweepValue]], sweep_type: SweepType) -> list[Variation]:
    """The combinations of `parameters`; raises `ConfigError` for a zip of unequal lengths."""
    keys = list(parameters)
    if sweep_type is SweepType.ZIP:
        lengths = {len(v) for v in parameters.values()}
        if len(lengths) > 1:
            raise ConfigError("--sweep-type zip: every swept parameter needs the same number of values")
        combos: list[tuple[SweepValue, ...]] = list(zip(*parameters.values(), strict=True))
    else:
        combos = list(itertools.product(*parameters.values()))
    out = []
    for i, combo in enumerate(combos):
        values = dict(zip(keys, combo, strict=True))
        out.append(Variation(index=i, label=label_of(values), values=values))
    labels = [v.label for v in out]
    if len(set(labels)) != len(labels):
        raise ConfigError("sweep: the same combination appears twice (repeated values)")
    return out


def trial_seed(trial: int, seed: int | None, multi_run: MultiRun) -> int | None:
    """The seed of trial `trial`: the given seed (or `DEFAULT_SEED` with a consistent seed), plus
    trial - 1 when seeds vary per trial."""
    base = seed if seed is not None or not multi_run.set_consistent_seed else DEFAULT_SEED
    if base is None or not multi_run.vary_seed_per_trial:
        return base
    return base + trial - 1


def build_plan(*, variations: Sequence[Variation], multi_run: MultiRun, sweep_cooldown_s: float = 0.0,
               sweep_type: SweepType = SweepType.GRID, seed: int | None = None) -> Plan:
    """The runs of `multi_run.num_runs` trials of each variation (one variation without a sweep:
    pass none). The first run has no cooldown; a new trial starts after
    `multi_run.cooldown_seconds`, a new variation within a trial after `sweep_cooldown_s`. Warmup
    runs in the first trial of each variation only, unless `disable_warmup_after_first` is off."""
    each: list[Variation | None] = list(variations) or [None]
    runs: list[PlannedRun] = []
    for trial in range(1, multi_run.num_runs + 1):
        for position, variation in enumerate(each):
            if not runs:
                cooldown = 0.0
            elif position == 0:
                cooldown = multi_run.cooldown_seconds
            else:
                cooldown = sweep_cooldown_s
            folder = f"profile_runs/trial_{trial:04d}"
            if variation is not None:
                folder += f"/{variation.label}"
            runs.append(PlannedRun(trial=trial, variation=variation, artifact_subdir=folder, cooldown_s=cooldown,
                                   warmup=trial == 1 or not multi_run.disable_warmup_after_first,
                                   seed=trial_seed(trial, seed, multi_run)))
    return Plan(runs=runs, variations=list(variations), sweep_type=sweep_type, multi_run=multi_run)


def _decode_block(value: Any, model: type[Sweep] | type[MultiRun], name: str, source: str) -> Any:
    from aiperf.config.loader import describe_error, snake

    if isinstance(value, dict):  # one level: the keys of `parameters` are paths, kept as written
        value = {snake(k) if isinstance(k, str) else k: v for k, v in value.items()}
    try:
        return msgspec.convert(value, model)
    except msgspec.ValidationError as exc:
        where, what = describe_error(exc)
        path = f"{name}.{where}" if where else name
        raise ConfigError(f"{source + ': ' if source else ''}{path}: {what}") from None


def split_sweep_blocks(document: Any, *, source: str = "") -> tuple[Any, Sweep | None, MultiRun | None]:
    """`document` without its envelope's `sweep:` and `multi_run:` blocks (camelCase
    `multiRun` too), and those blocks validated; raises `ConfigError` naming the field."""
    if not isinstance(document, dict) or "benchmark" not in document:
        return document, None, None
    doc = dict(document)
    sweep = doc.pop("sweep", None)
    multi = doc.pop("multi_run", doc.pop("multiRun", None))
    return (doc, None if sweep is None else _decode_block(sweep, Sweep, "sweep", source),
            None if multi is None else _decode_block(multi, MultiRun, "multi_run", source))


def _child(node: Any, segment: str, key: str) -> Any:
    if isinstance(node, list):
        if segment.isdigit() and int(segment) < len(node):
            return node[int(segment)]
        for item in node:  # a phase by name, or by kind for the canonical names
            if isinstance(item, dict) and segment in (item.get("name", "profiling"), item.get("kind")):
                return item
        raise ConfigError(f"sweep parameter {key}: no {segment!r} in the benchmark")
    if not isinstance(node, dict):
        raise ConfigError(f"sweep parameter {key}: {segment!r} is inside a value, not a section")
    return node.setdefault(segment, {})


_DEFAULT_LISTS: dict[str, list[dict[str, Any]]] = {
    "phases": [{"name": "profiling", "type": "concurrency", "requests": 10}],
    "datasets": [{"type": "synthetic"}],
}


def apply_values(document: Mapping[str, Any], values: Mapping[str, SweepValue]) -> dict[str, Any]:
    """A copy of a canonical benchmark document (`aiperf.config.normalize`) with each dotted path
    of `values` set (`phases.profiling.concurrency`; `dataset.` is the one dataset; a list
    segment is an index, a phase name or kind). Missing sections are created; the model
    validates the result. Raises `ConfigError` for a path that leads nowhere."""
    doc = copy.deepcopy(dict(document))
    for key, value in values.items():
        parts = key.split(".")
        if parts[0] == "dataset":
            parts = ["datasets", "0", *parts[1:]]
        if parts[0] in _DEFAULT_LISTS and len(parts) > 2:  # the model's defaults, made explicit
            doc.setdefault(parts[0], copy.deepcopy(_DEFAULT_LISTS[parts[0]]))
        node: Any = doc
        for segment in parts[:-1]:
            node = _child(node, segment, key)
        if not isinstance(node, dict):
            raise ConfigError(f"sweep parameter {key}: does not name a field")
        node[parts[-1]] = value
    return doc
