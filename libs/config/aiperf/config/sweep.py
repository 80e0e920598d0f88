"""The one planner of sweeps and repeated runs, for local runs and the cluster alike.

A sweep varies parameters of a benchmark: `parameters` maps a key to the values it takes (a
dotted path into the benchmark document, `phases.profiling.concurrency`, for config files and
AIPerfSweep CRs, where AIPerf's bare names `concurrency`, `rate`, `requests`, ... mean the
profiling phase's; a flag's field name, `concurrency`, for comma lists on the command line).
`variations` expands them (`grid`: every combination, in the order the parameters are given,
the last one varying fastest; `zip`: the i-th value of each). A `scenarios` sweep lists named
runs instead, each a partial benchmark merged over the base one (`Scenario`). A list of numbers
in a phase's `concurrency`, `rate`, `requests`, ... (AIPerf's "magic list") is a grid sweep of
that field. `build_plan` lays the runs out:
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
import hashlib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

import msgspec
from msgspec import Meta

from aiperf.config.benchmark import Benchmark
from aiperf.config.loader import ConfigError

__all__ = [
    "DEFAULT_SEED", "MAGIC_LIST_FIELDS", "PATH_ALIASES", "MultiRun", "Plan", "PlannedRun", "RunExecutor",
    "SAMPLING_TYPES", "Dimension", "RunOutcome", "Scenario", "Sweep", "SweepType", "Variation", "apply_values",
    "build_plan", "decode_block", "label_of", "sampled_variations",
    "merge_overlay", "scenario_variations", "split_sweep_blocks", "sweep_variations", "trial_seed",
    "variation_seed", "variations",
]

DEFAULT_SEED = 42
"""The seed of every trial when none is given and `set_consistent_seed` is on (AIPerf's)."""


class SweepType(enum.StrEnum):
    """`grid`: every combination of the parameters' values; `zip`: the i-th value of each;
    `scenarios`: a list of named partial benchmarks; `latin_hypercube`, `sobol`: `samples`
    quasi-random points of the `dimensions` (`aiperf.config.qmc`)."""

    GRID = "grid"
    ZIP = "zip"
    SCENARIOS = "scenarios"
    LATIN_HYPERCUBE = "latin_hypercube"
    SOBOL = "sobol"


SAMPLING_TYPES = (SweepType.LATIN_HYPERCUBE, SweepType.SOBOL)
"""The sweep types that sample `dimensions` instead of listing values."""


SweepValue = int | float | str | bool
SweepKey = Annotated[str, Meta(pattern=r"^[a-z_][a-z0-9_]*(\.[A-Za-z0-9_-]+)*$", max_length=256)]
ScenarioName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=63)]

PATH_ALIASES = {name: f"phases.profiling.{name}" for name in (
    "concurrency", "prefill_concurrency", "rate", "requests", "duration", "sessions", "users", "smoothness",
    "grace_period", "concurrency_ramp", "prefill_ramp", "rate_ramp")}
"""AIPerf's bare sweep names: each is the profiling phase's field of that name."""

MAGIC_LIST_FIELDS = ("concurrency", "prefill_concurrency", "rate", "requests", "duration", "sessions", "users")
"""Phase fields whose list of numbers is a grid sweep of that field (AIPerf's magic lists)."""


class _Block(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the envelope blocks: immutable, unknown fields are an error."""


class Scenario(_Block, frozen=True, kw_only=True):
    """One run of a `scenarios` sweep: `benchmark` is merged over the base benchmark (mappings key
    by key, lists of named entries such as phases and datasets by name, a distribution whole)."""

    name: ScenarioName
    benchmark: dict[str, Any] = {}


FiniteFloat = Annotated[float, Meta(ge=-1e300, le=1e300)]


class Dimension(_Block, frozen=True, kw_only=True):
    """One dimension of a `latin_hypercube`/`sobol` sweep (AIPerf's `SamplingDimension`): the
    dotted `path` it sets and either `lo`..`hi` (inclusive; `scale` linear or log, `kind` int
    or real) or `choices` (each an equal share of the unit interval)."""

    path: SweepKey
    lo: FiniteFloat | None = None
    hi: FiniteFloat | None = None
    scale: Literal["linear", "log"] = "linear"
    kind: Literal["int", "real"] = "real"
    choices: Annotated[list[SweepValue], Meta(min_length=1)] | None = None

    def __post_init__(self) -> None:
        ranged = self.lo is not None and self.hi is not None
        if ranged == (self.choices is not None):
            raise ValueError(f"dimensions: {self.path}: give either lo and hi, or choices")
        if self.lo is not None and self.hi is not None:
            if self.hi <= self.lo:
                raise ValueError(f"dimensions: {self.path}: hi ({self.hi:g}) must be above lo ({self.lo:g})")
            if self.scale == "log" and self.lo <= 0:
                raise ValueError(f"dimensions: {self.path}: a log scale needs lo > 0")

    def value_at(self, u: float) -> SweepValue:
        """Its value at unit coordinate `u` (`aiperf.config.qmc.map_unit`)."""
        from aiperf.config.qmc import map_unit

        value: SweepValue = map_unit(u, lo=self.lo, hi=self.hi, scale=self.scale, kind=self.kind,
                                     choices=self.choices)
        return value


class Sweep(_Block, frozen=True, kw_only=True):
    """A config file's `sweep:` block: `parameters` (dotted path -> values) of a `grid` or `zip`,
    or the named `runs` of `scenarios`, or `samples` points of the `dimensions` of a
    `latin_hypercube`/`sobol` sweep (drawn with `seed`; `scramble` for sobol, `optimization`
    for latin_hypercube: see `aiperf.config.qmc` for what each draws); and the pause between
    variations. `iteration_order` `repeated` runs every variation of a trial before the next
    trial (AIPerf's default); `same_seed` gives every variation the trial's seed (else each
    derives its own)."""

    type: SweepType = SweepType.GRID
    parameters: Annotated[dict[SweepKey, Annotated[list[SweepValue], Meta(min_length=1, max_length=64)]],
                          Meta(max_length=8)] = {}
    runs: Annotated[list[Scenario], Meta(max_length=64)] = []
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0
    iteration_order: Literal["repeated"] = "repeated"
    same_seed: bool = False
    samples: Annotated[int, Meta(ge=2, le=2**20)] | None = None
    seed: Annotated[int, Meta(ge=0)] | None = None
    dimensions: Annotated[list[Dimension], Meta(max_length=8)] = []
    scramble: bool = True
    optimization: Literal["random-cd", "lloyd"] | None = "random-cd"

    def __post_init__(self) -> None:
        if self.type in SAMPLING_TYPES:
            if self.samples is None or not self.dimensions or self.parameters or self.runs:
                raise ValueError(f"dimensions: a {self.type} sweep needs samples and dimensions "
                                 "(and no parameters or runs)")
            paths = [d.path for d in self.dimensions]
            if len(set(paths)) != len(paths):
                raise ValueError("dimensions: each path once")
            return
        if self.samples is not None or self.dimensions:
            raise ValueError(f"samples: only a latin_hypercube or sobol sweep samples dimensions, not {self.type}")
        if self.type is SweepType.SCENARIOS:
            if not self.runs or self.parameters:
                raise ValueError("runs: a scenarios sweep lists its runs (and no parameters)")
            if len({r.name for r in self.runs}) != len(self.runs):
                raise ValueError("runs: scenario names must be distinct")
            return
        if not self.parameters or self.runs:
            raise ValueError(f"parameters: a {self.type} sweep needs parameters (and no runs)")
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
    """One combination of parameter values, or one scenario (`overlay`, its partial benchmark
    in canonical form); `label` names its folders (`concurrency_16`, the scenario's name)."""

    index: int
    label: str
    values: dict[str, SweepValue]
    overlay: dict[str, Any] | None = None


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

    def aiperf_aliases(self) -> dict[str, str]:
        """Where AIPerf 0.13.0 puts what this plan writes, where that differs (alias -> our
        folder, both relative to the artifact dir): a sweep of one trial writes each variation
        in `<label>/` and the sweep aggregate in `sweep_aggregate/`; repeated runs without a
        sweep write `profile_runs/run_000N/`. (A sweep of several trials has our layout.)"""
        aliases: dict[str, str] = {}
        if self.variations:
            aliases["sweep_aggregate"] = "aggregate/sweep_aggregate"
            if self.multi_run.num_runs == 1:
                aliases.update({r.variation.label: r.artifact_subdir for r in self.runs if r.variation is not None})
        elif self.multi_run.num_runs > 1:
            aliases.update({f"profile_runs/run_{r.trial:04d}": r.artifact_subdir for r in self.runs})
        return aliases

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


def label_of(values: Mapping[str, SweepValue]) -> str:
    """The folder name of a variation, AIPerf 0.13's: each key's last segment and its value
    (`concurrency_16`, `rate_5.0`), several joined by `__` (`isl_128__rate_10.0`); path
    separators and `..` removed."""
    text = "__".join(f"{key.rsplit('.', 1)[-1]}_{value}" for key, value in values.items())
    return re.sub(r'[<>:"|?*]', "", re.sub(r"[/\\]|\.\.", "", text))


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


def scenario_variations(runs: Sequence[Scenario]) -> list[Variation]:
    """One variation per scenario, labelled by its name; its overlay normalized (camelCase and
    AIPerf's shorthands understood, unbuilt features refused by name)."""
    from aiperf.config.loader import normalize_partial

    out = []
    for index, run in enumerate(runs):
        try:
            overlay = normalize_partial(run.benchmark)
        except ConfigError as exc:
            raise ConfigError(f"sweep.runs[{index}] ({run.name}): {exc}") from None
        out.append(Variation(index=index, label=run.name, values={}, overlay=overlay))
    return out


def sampled_variations(sweep: Sweep) -> list[Variation]:
    """The `samples` points of a `latin_hypercube`/`sobol` sweep, each a variation of one value
    per dimension, labelled like a grid's (`label_of`: AIPerf's folder names). A point that
    repeats an earlier one (integer or choice dimensions) is kept, as AIPerf keeps it, its
    label suffixed `_2`, `_3`, ... so that each run has its own folder."""
    from aiperf.config.qmc import latin_hypercube, sobol

    assert sweep.samples is not None
    n, d = sweep.samples, len(sweep.dimensions)
    if sweep.type is SweepType.SOBOL:
        points = sobol(n, d, seed=sweep.seed, scramble=sweep.scramble)
    else:
        points = latin_hypercube(n, d, seed=sweep.seed)
    out: list[Variation] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(points):
        values = {dim.path: dim.value_at(float(u)) for dim, u in zip(sweep.dimensions, row, strict=True)}
        label = label_of(values)
        seen[label] = seen.get(label, 0) + 1
        out.append(Variation(index=index, label=label if seen[label] == 1 else f"{label}_{seen[label]}",
                             values=values))
    return out


def sweep_variations(sweep: Sweep) -> list[Variation]:
    """The variations of a `sweep:` block (grid, zip, scenarios, latin_hypercube or sobol)."""
    if sweep.type is SweepType.SCENARIOS:
        return scenario_variations(sweep.runs)
    if sweep.type in SAMPLING_TYPES:
        return sampled_variations(sweep)
    return variations(sweep.parameters, sweep.type)


def trial_seed(trial: int, seed: int | None, multi_run: MultiRun) -> int | None:
    """The seed of trial `trial`: the given seed (or `DEFAULT_SEED` with a consistent seed), plus
    trial - 1 when seeds vary per trial."""
    base = seed if seed is not None or not multi_run.set_consistent_seed else DEFAULT_SEED
    if base is None or not multi_run.vary_seed_per_trial:
        return base
    return base + trial - 1


def variation_seed(seed: int | None, label: str) -> int | None:
    """The seed a variation derives from the trial's `seed` when variations do not share one: a
    stable function of both (None stays None)."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def build_plan(*, variations: Sequence[Variation], multi_run: MultiRun, sweep_cooldown_s: float = 0.0,
               sweep_type: SweepType = SweepType.GRID, seed: int | None = None,
               same_seed: bool = True) -> Plan:
    """The runs of `multi_run.num_runs` trials of each variation (one variation without a sweep:
    pass none). The first run has no cooldown; a new trial starts after
    `multi_run.cooldown_seconds`, a new variation within a trial after `sweep_cooldown_s`. Warmup
    runs in the first trial of each variation only, unless `disable_warmup_after_first` is off.
    Every run of a trial has the trial's seed, unless `same_seed` is off: then each variation
    derives its own from it (`variation_seed`)."""
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
            run_seed = trial_seed(trial, seed, multi_run)
            if variation is not None:
                folder += f"/{variation.label}"
                if not same_seed:
                    run_seed = variation_seed(run_seed, variation.label)
            runs.append(PlannedRun(trial=trial, variation=variation, artifact_subdir=folder, cooldown_s=cooldown,
                                   warmup=trial == 1 or not multi_run.disable_warmup_after_first, seed=run_seed))
    return Plan(runs=runs, variations=list(variations), sweep_type=sweep_type, multi_run=multi_run)


_UNBUILT_SWEEP_KEYS = {
    "sla_filters": "filtering variations by SLA is not built",
    "post_process": "sweep post-processing handlers are not built",
    "convergence": "stopping trials once a metric converges is not built",
}
_INERT_SWEEP_KEYS = ("recipe_name", "label_format")  # label_format: AIPerf's display label; folders are the same


def _snake_block(value: Any) -> Any:
    """A block's keys in snake_case, one level deep (the keys of `parameters` are paths, and a
    scenario's `benchmark` is normalized on its own)."""
    from aiperf.config.loader import snake

    if not isinstance(value, dict):
        return value
    out = {snake(k) if isinstance(k, str) else k: v for k, v in value.items()}
    if isinstance(out.get("runs"), list):
        out["runs"] = [{snake(k) if isinstance(k, str) else k: v for k, v in r.items()} if isinstance(r, dict)
                       else r for r in out["runs"]]
    return out


def decode_block(value: Any, model: type[Sweep] | type[MultiRun], name: str, source: str) -> Any:
    """A `sweep:` (`Sweep`) or `multi_run:` (`MultiRun`) block as written (camelCase or
    snake_case), checked; raises `ConfigError` `[<source>: ]<name>.<field>: <reason>` (AIPerf's
    sweep types and keys we do not build are refused by name)."""
    from aiperf.config.loader import describe_error

    value = _snake_block(value)
    if isinstance(value, dict):
        for key, reason in _UNBUILT_SWEEP_KEYS.items():
            if value.get(key) not in (None, [], {}):
                raise ConfigError(f"{source + ': ' if source else ''}{name}.{key}: not supported ({reason})")
            value.pop(key, None)
        for key in _INERT_SWEEP_KEYS:
            value.pop(key, None)
        if model is Sweep:
            value = _sweep_block(value, source, name)
    try:
        return msgspec.convert(value, model)
    except msgspec.ValidationError as exc:
        where, what = describe_error(exc)
        path = f"{name}.{where}" if where else name
        raise ConfigError(f"{source + ': ' if source else ''}{path}: {what}") from None


_QMC = {"latin_hypercube", "sobol"}


def _sweep_block(value: dict[str, Any], source: str, name: str) -> dict[str, Any]:
    """AIPerf's sweep types we do not build refused by name; bare parameter names resolved."""
    kind = value.get("type")
    prefix = f"{source}: " if source else ""
    for key, only in (("scramble", "sobol"), ("optimization", "latin_hypercube")):
        if key in value and kind != only:
            raise ConfigError(f"{prefix}{name}.{key}: only for a {only} sweep")
    if kind in _QMC:
        from aiperf.config.qmc import MAX_SOBOL_DIMENSIONS

        dims = value.get("dimensions")
        if kind == "sobol" and isinstance(dims, list) and len(dims) > MAX_SOBOL_DIMENSIONS:
            raise ConfigError(f"{prefix}{name}.dimensions: not supported (a sobol sweep of more than "
                              f"{MAX_SOBOL_DIMENSIONS} dimensions is not built)")
        for index, dim in enumerate(dims if isinstance(dims, list) else []):
            path = dim.get("path") if isinstance(dim, dict) else None
            if isinstance(path, str) and path.split(".")[0] == "variables":
                raise ConfigError(f"{prefix}{name}.dimensions[{index}].path: not supported (sweeping a "
                                  "variable; sweep the field it sets)")
    if kind == "adaptive_search":
        raise ConfigError(f"{prefix}{name}.type: adaptive_search: not supported (searching for an optimum "
                          "with a planner is not built)")
    if isinstance(value.get("parameters"), dict):
        resolved: dict[Any, Any] = {}
        for key, values in value["parameters"].items():
            path = PATH_ALIASES.get(key, key) if isinstance(key, str) else key
            if isinstance(path, str) and path.split(".")[0] == "variables":
                raise ConfigError(f"{prefix}{name}.parameters.{key}: not supported (sweeping a variable; "
                                  "sweep the field it sets)")
            if path in resolved:
                raise ConfigError(f"{prefix}{name}.parameters.{key}: the same field as {path}; give it once")
            resolved[path] = values
        value = {**value, "parameters": resolved}
    return value


def _magic_lists(document: dict[str, Any]) -> dict[str, list[SweepValue]]:
    """The phase fields given as a list of numbers (AIPerf's magic-list sweeps), by dotted path,
    each replaced in `document` by its first value."""
    from aiperf.config.loader import snake

    body = document.get("benchmark")
    if not isinstance(body, dict):
        return {}
    phases = body.get("phases")
    named: list[tuple[str, dict[str, Any]]] = []
    if isinstance(phases, dict):
        named = [("profiling", phases)]
    elif isinstance(phases, list):
        named = [(str(p.get("name")), p) for p in phases if isinstance(p, dict) and isinstance(p.get("name"), str)]
    for key in ("warmup", "profiling"):
        if isinstance(body.get(key), dict):
            named.append((key, body[key]))
    found: dict[str, list[SweepValue]] = {}
    for name, phase in named:
        for key in list(phase):
            values = phase[key]
            field = snake(key) if isinstance(key, str) else key
            if (field in MAGIC_LIST_FIELDS and isinstance(values, list) and values
                    and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)):
                found[f"phases.{name}.{field}"] = values
                phase[key] = values[0]
    return found


def split_sweep_blocks(document: Any, *, source: str = "") -> tuple[Any, Sweep | None, MultiRun | None]:
    """`document` without its envelope's `sweep:` and `multi_run:` blocks (camelCase
    `multiRun` too), and those blocks validated; a phase field given as a list of numbers
    becomes a grid sweep of it. Raises `ConfigError` naming the field (AIPerf's sweep types and
    keys we do not build are refused by name)."""
    if not isinstance(document, dict) or "benchmark" not in document:
        return document, None, None
    doc = copy.deepcopy(dict(document))
    sweep_value = doc.pop("sweep", None)
    multi = doc.pop("multi_run", doc.pop("multiRun", None))
    magic = _magic_lists(doc)
    sweep = None if sweep_value is None else decode_block(sweep_value, Sweep, "sweep", source)
    if magic:
        if sweep is not None:
            raise ConfigError(f"{source + ': ' if source else ''}a list of values in {', '.join(magic)} and a "
                              "sweep: block: give the sweep one way")
        sweep = Sweep(type=SweepType.GRID, parameters=magic)
    return doc, sweep, None if multi is None else decode_block(multi, MultiRun, "multi_run", source)


_LIST_DEFAULT_NAMES = {"phases": "profiling", "datasets": "default"}


def _child(node: Any, segment: str, key: str, list_name: str) -> Any:
    if isinstance(node, list):
        if segment.isdigit() and int(segment) < len(node):
            return node[int(segment)]
        default = _LIST_DEFAULT_NAMES.get(list_name, "")
        for item in node:  # an entry by name, or a phase by kind for the canonical names
            if isinstance(item, dict) and segment in (item.get("name", default), item.get("kind")):
                return item
        raise ConfigError(f"sweep parameter {key}: no {segment!r} in the benchmark")
    if not isinstance(node, dict):
        raise ConfigError(f"sweep parameter {key}: {segment!r} is inside a value, not a section")
    return node.setdefault(segment, {})


_DEFAULT_LISTS: dict[str, list[dict[str, Any]]] = {
    "phases": [{"name": "profiling", "type": "concurrency", "requests": 10}],
    "datasets": [{"name": "default", "type": "synthetic"}],
}
_DISTRIBUTION_KEYS = frozenset({"mean", "stddev", "median", "peaks", "points"})


def merge_overlay(base: Any, overlay: Any) -> Any:
    """`overlay` (a scenario's partial benchmark) merged over `base`: mappings key by key, lists
    of named mappings entry by entry (by name; a new name is appended), anything else replaced. A
    distribution (a mapping with a mean, peaks or points) replaces its base whole: a normal over a
    log-normal must not leave both shapes' keys."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        if _DISTRIBUTION_KEYS & set(overlay) and _DISTRIBUTION_KEYS & set(base):
            return copy.deepcopy(overlay)
        out = dict(base)
        for key, value in overlay.items():
            out[key] = merge_overlay(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (isinstance(base, list) and isinstance(overlay, list)
            and all(isinstance(i, dict) and "name" in i for i in overlay)
            and all(isinstance(i, dict) for i in base)):
        out_list = [dict(i) for i in base]
        for item in overlay:
            match = next((i for i, b in enumerate(out_list) if b.get("name") == item["name"]), None)
            if match is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[match] = merge_overlay(out_list[match], item)
        return out_list
    return copy.deepcopy(overlay)


def apply_values(document: Mapping[str, Any], values: Mapping[str, SweepValue],
                 overlay: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a canonical benchmark document (`aiperf.config.normalize`) with a scenario's
    `overlay` merged over it (`merge_overlay`) and each dotted path of `values` set
    (`phases.profiling.concurrency`; `dataset.` is the one dataset; a list segment is an index,
    an entry's name or a phase's kind), normalized again (a bare number for a length is a mean).
    Missing sections are created; the model validates the result. Raises `ConfigError` for a
    path that leads nowhere."""
    from aiperf.config.loader import normalize_partial

    doc = copy.deepcopy(dict(document))
    if overlay:
        for key in ("phases", "datasets"):
            if key in overlay:
                doc.setdefault(key, copy.deepcopy(_DEFAULT_LISTS[key]))
        doc = merge_overlay(doc, dict(overlay))
    for key, value in values.items():
        parts = key.split(".")
        if parts[0] == "dataset":
            parts = ["datasets", "0", *parts[1:]]
        if parts[0] in _DEFAULT_LISTS and len(parts) > 2:  # the model's defaults, made explicit
            doc.setdefault(parts[0], copy.deepcopy(_DEFAULT_LISTS[parts[0]]))
        node: Any = doc
        parent = ""
        for segment in parts[:-1]:
            node, parent = _child(node, segment, key, parent), segment
        if not isinstance(node, dict):
            raise ConfigError(f"sweep parameter {key}: does not name a field")
        node[parts[-1]] = value
    return normalize_partial(doc)
