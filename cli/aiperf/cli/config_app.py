"""`aiperf config ...`: the benchmark model as a JSON Schema, and offline validation of AIPerf
config v2 files (the same checks `aiperf profile --config` runs before starting anything)."""

from __future__ import annotations

from typing import Annotated

import cyclopts
from cyclopts import Parameter

config_app = cyclopts.App(
    name="config",
    help="The benchmark model: print its JSON Schema, validate config files (AIPerf config v2).",
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
    """Check config files (YAML or JSON, AIPerf config v2) offline: one line per file, `ok` or the
    first problem. Exit 0 when all are valid, 2 otherwise.

    Parameters
    ----------
    files
        The config files to check.
    """
    import sys

    from aiperf.config import ConfigError, decode_benchmark, normalize
    from aiperf.config.loader import load_document

    bad = 0
    for path in files:
        try:
            document, _ = normalize(load_document(path))
            decode_benchmark(document, source=path)
        except ConfigError as exc:
            message = str(exc)
            print(f"error: {message if message.startswith(path) else f'{path}: {message}'}", file=sys.stderr)
            bad += 1
        else:
            print(f"{path}: ok")
    return 2 if bad else 0
