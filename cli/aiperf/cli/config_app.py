"""`aiperf config ...`: the benchmark model as a JSON Schema, and offline validation of AIPerf
config v2 files (the same checks `aiperf profile --config` runs before starting anything)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import cyclopts
from cyclopts import Parameter

config_app = cyclopts.App(
    name="config",
    help="The benchmark model: print its JSON Schema, validate config files (AIPerf config v2), "
         "expand a config's sweep into its variations.",
)


@config_app.command
def schema(*, output: Annotated[str | None, Parameter(name=["--output", "-o"])] = None) -> int:
    """Print the JSON Schema of a benchmark (the `benchmark:` body of a config file, the
    `spec.benchmark` of an AIPerfJob). Point an editor's YAML language server at it.

    Parameters
    ----------
    output
        Write it to this file instead of stdout.
    """
    import json
    import sys
    from pathlib import Path

    from aiperf.config import benchmark_schema

    text = json.dumps(benchmark_schema(), indent=2, sort_keys=True) + "\n"
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(output).write_text(text)
    except OSError as exc:
        print(f"error: --output {output}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


@config_app.command
def validate(files: list[str], /) -> int:
    """Check config files (YAML or JSON, AIPerf config v2) offline, each variation of a `sweep:`
    block too, as `aiperf profile --config` would (`${VAR}` references and Jinja2 `variables`
    resolved): one line per file, `ok` or the first problem (an AIPerf feature we do not build is
    named as such). Exit 0 when all are valid, 2 otherwise.

    Parameters
    ----------
    files
        The config files to check.
    """
    import sys

    from aiperf.config import ConfigError

    bad = 0
    for path in files:
        try:
            expand_config(path)  # every variation of a sweep, too
        except ConfigError as exc:
            message = str(exc)
            print(f"error: {message if message.startswith(path) else f'{path}: {message}'}", file=sys.stderr)
            bad += 1
        else:
            print(f"{path}: ok")
    return 2 if bad else 0


def expand_config(file: str) -> tuple[Any, list[dict[str, Any]]]:
    """The plan of a config file's `sweep:`/`multi_run:` blocks and, per variation (one without
    a sweep), its label, values, run folders and validated benchmark (as builtins); raises
    `aiperf.config.ConfigError` naming the variation."""
    import msgspec

    from aiperf.config import ConfigError, decode_benchmark, normalize
    from aiperf.config.loader import read_document
    from aiperf.config.sweep import (
        MultiRun,
        SweepType,
        Variation,
        apply_values,
        build_plan,
        split_sweep_blocks,
        sweep_variations,
    )

    rest, sweep, multi = split_sweep_blocks(read_document(file), source=file)
    document, _ = normalize(rest)
    planned = sweep_variations(sweep) if sweep is not None else []
    plan = build_plan(variations=planned, multi_run=multi or MultiRun(),
                      sweep_cooldown_s=sweep.cooldown_seconds if sweep else 0.0,
                      sweep_type=sweep.type if sweep else SweepType.GRID,
                      seed=document.get("random_seed"), same_seed=sweep.same_seed if sweep else True)
    out = []
    each: list[Variation | None] = [*planned] or [None]
    for variation in each:
        values = variation.values if variation is not None else {}
        try:
            bench = decode_benchmark(apply_values(document, values, variation.overlay if variation else None),
                                     source=file)
        except ConfigError as exc:
            if variation is None:
                raise
            raise ConfigError(f"{variation.label}: {exc}") from None
        out.append({"label": variation.label if variation is not None else "benchmark", "values": values,
                    "runs": [r.artifact_subdir for r in plan.runs_of(variation)],
                    "benchmark": msgspec.to_builtins(bench)})
    return plan, out


@config_app.command
def expand(file: str, /, *,
           format: Annotated[Literal["text", "yaml", "json"], Parameter(name=["--format", "-o"])] = "text") -> int:
    """Expand the `sweep:` (and `multi_run:`) blocks of a config file into the benchmarks they
    run, each validated like `aiperf profile --config` would: one line per variation (text), or
    every variation's label, values, run folders and full benchmark (yaml, json). Exit 2 when
    the file or a variation is invalid.

    Parameters
    ----------
    file
        The config file (YAML or JSON, AIPerf config v2).
    format
        text, yaml or json.
    """
    import json
    import sys

    import yaml

    from aiperf.config import ConfigError

    try:
        plan, out = expand_config(file)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = {"sweep_type": str(plan.sweep_type), "num_profile_runs": plan.multi_run.num_runs, "variations": out}
    if format == "json":
        print(json.dumps(result, indent=2))
    elif format == "yaml":
        print(yaml.safe_dump(result, sort_keys=False), end="")
    else:
        print(f"{file}: {len(out)} variation(s) ({plan.sweep_type}), {plan.multi_run.num_runs} trial(s) each, "
              f"{len(plan.runs)} run(s)")
        for item in out:
            values = ", ".join(f"{k}={v}" for k, v in item["values"].items()) or "(no sweep)"
            print(f"  {item['label']}: {values}")
    return 0
