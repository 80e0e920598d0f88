"""The multi-run and sweep flags of `aiperf profile` (AIPerf 0.13 names and defaults), and the
comma lists on sweepable flags (`--concurrency 4,8,16`).

cyclopts parses a flag as one typed value, so `prepare_profile_argv` takes the comma lists out of
argv first and passes them on as `--sweep-values FIELD=V1,V2,...` (a hidden flag). Each
variation then sets the field on the parsed flags, so it means exactly what the single flag
would. Standard library and cyclopts only at import time (`aiperf --help` stays fast).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Literal

from cyclopts import Parameter

from aiperf.cli.profile_args import FlagError

SWEEPABLE: dict[str, tuple[str, type[int] | type[float]]] = {
    "--concurrency": ("concurrency", int),
    "--prefill-concurrency": ("prefill_concurrency", int),
    "--request-rate": ("request_rate", float),
    "--request-count": ("request_count", int), "--num-requests": ("request_count", int),
    "--benchmark-duration": ("benchmark_duration", float),
    "--isl": ("isl", int), "--synthetic-input-tokens-mean": ("isl", int), "--prompt-input-tokens-mean": ("isl", int),
    "--osl": ("osl", int), "--output-tokens-mean": ("osl", int), "--prompt-output-tokens-mean": ("osl", int),
    "--num-dataset-entries": ("num_dataset_entries", int), "--num-prompts": ("num_dataset_entries", int),
}
"""Flags that take a comma list, by spelling: the `ProfileFlags` field and its value type."""

SWEEP_VALUES_FLAG = "--sweep-values"


@Parameter(name="*")
@dataclass(frozen=True, kw_only=True)
class MultiRunFlags:
    """Repeated runs with confidence intervals, and parameter sweeps (`aiperf profile` only)."""

    num_profile_runs: int | None = None
    """Runs of the benchmark (trials), 1-10; more than one adds profile_runs/trial_000N/ and
    aggregate/profile_export_aiperf_aggregate.json/.csv with confidence intervals (default: 1)."""
    profile_run_cooldown_seconds: float | None = None
    """Pause before each trial after the first (default: 0.0)."""
    confidence_level: float | None = None
    """Confidence level of the Student-t intervals, between 0 and 1 (default: 0.95)."""
    profile_run_disable_warmup_after_first: bool | None = None
    """Send the warmup requests in the first trial only (default: true)."""
    set_consistent_seed: bool | None = None
    """Use seed 42 in every trial when --random-seed is not given (default: true)."""
    vary_seed_per_trial: bool | None = None
    """Seed trial N with the seed + N - 1 (independent samples) (default: false)."""
    sweep_type: Literal["grid", "zip"] | None = None
    """How comma lists combine: grid (every combination) or zip (the i-th value of each)
    (default: grid)."""
    parameter_sweep_cooldown_seconds: float | None = None
    """Pause before each variation of a sweep after the first (default: 0.0)."""
    sweep_values: Annotated[list[str] | None, Parameter(name=SWEEP_VALUES_FLAG, show=False,
                                                         consume_multiple=False)] = None
    """FIELD=V1,V2,...: set by `prepare_profile_argv` from comma lists."""

    @property
    def wanted(self) -> bool:
        """Whether any of these flags was given (else `aiperf profile` is one plain run)."""
        return any(getattr(self, f.name) is not None for f in fields(self))


MULTI_RUN_FIELDS = {
    "num_profile_runs": "num_runs", "profile_run_cooldown_seconds": "cooldown_seconds",
    "confidence_level": "confidence_level", "profile_run_disable_warmup_after_first": "disable_warmup_after_first",
    "set_consistent_seed": "set_consistent_seed", "vary_seed_per_trial": "vary_seed_per_trial",
}
"""Which `aiperf.config.sweep.MultiRun` field each flag sets."""


def _parse(flag: str, text: str, kind: type[int] | type[float]) -> list[int | float]:
    values: list[int | float] = []
    for item in text.split(","):
        try:
            values.append(kind(item.strip()))
        except ValueError:
            noun = "an integer" if kind is int else "a number"
            raise FlagError(f"{flag} {text!r}: {item.strip()!r} is not {noun}") from None
    return values


def prepare_profile_argv(args: list[str]) -> list[str]:
    """`args` of `aiperf profile ...` with every comma list on a sweepable flag replaced by
    `--sweep-values FIELD=V1,...`; raises `FlagError` for a bad value or a flag swept twice."""
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if name in SWEEPABLE:
            text = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            if "," in text:
                field, kind = SWEEPABLE[name]
                if field in seen:
                    raise FlagError(f"{name}: swept twice")
                seen.add(field)
                values = _parse(name, text, kind)
                out += [SWEEP_VALUES_FLAG, f"{field}={','.join(map(str, values))}"]
                i += 1 if eq else 2
                continue
        out.append(arg)
        i += 1
    return out


def sweep_parameters(items: list[str] | None) -> dict[str, list[int | float]]:
    """The `--sweep-values` items as {field: values}, in command-line order."""
    out: dict[str, list[int | float]] = {}
    by_field: dict[str, tuple[str, type[int] | type[float]]] = {}
    for flag, (field, kind) in SWEEPABLE.items():
        by_field.setdefault(field, (flag, kind))
    for item in items or []:
        field, _, text = item.partition("=")
        if field not in by_field:
            raise FlagError(f"{SWEEP_VALUES_FLAG} {item!r}: {field!r} cannot be swept")
        flag, kind = by_field[field]
        out[field] = _parse(flag, text, kind)
    return out
