"""`artifacts.user_files` (AIPerf 0.13's): files the user declares, rendered with Jinja2 and written
into the run's artifact folder before the benchmark starts.

Each entry has a `path` (relative to the run folder; subfolders made; an absolute path, a `..`
part or a control character is refused), a `format` (`json`, `yaml` or `text`; by default `text`
for string content, `json` otherwise) and `content`. Every string in the content is a Jinja2
template (strict: an unknown name is an error), rendered with the config's `variables` and the
run's own names (which win over a variable of the same name): `epoch` (the run's start, Unix
seconds), `job_name` (the AIPerfJob's name in a cluster, the artifact folder's name locally),
`namespace` (`AIPERF_NAMESPACE`, empty locally), `model`, `endpoint_url` and `artifact_dir`. In
`json` and `yaml` content a rendered string that reads as a boolean or a number becomes one (a
string written without a template stays a string); `json` is written indented by 2, `yaml` in
block style with the keys in order, `text` as rendered.

The reader checks the templates render (with placeholder run names: `check_user_files`), so a
mistake is found by `aiperf config validate`, not when the run starts.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from aiperf.config.errors import ConfigError
from aiperf.config.templating import coerce_scalar, jinja_environment

if TYPE_CHECKING:
    from aiperf.config.benchmark import Benchmark, UserFile

__all__ = ["RUN_NAMES", "NAMESPACE_ENV", "check_user_files", "user_file_context", "write_user_files"]

RUN_NAMES = ("epoch", "job_name", "namespace", "model", "endpoint_url", "artifact_dir")
"""The names a user file's templates get from the run (beside the config's `variables`)."""
NAMESPACE_ENV = "AIPERF_NAMESPACE"
_MARKERS = ("{{", "{%", "{#")


def check_path(path: str) -> str | None:
    """Why `path` cannot name a user file (None when it can)."""
    if not path:
        return "an empty path"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "a control character in the path"
    posix = PurePosixPath(path)
    if posix.is_absolute():
        return "an absolute path (give one relative to the artifact folder)"
    if ".." in posix.parts:
        return "'..' in the path (it must stay in the artifact folder)"
    return None


def user_file_context(benchmark: Benchmark, *, run_dir: str | os.PathLike[str], job_name: str,
                      namespace: str = "", epoch: str | None = None) -> dict[str, Any]:
    """What a user file's templates see: the config's variables, then the run's names."""
    return {**benchmark.variables, "epoch": epoch if epoch is not None else str(int(time.time())),
            "job_name": job_name, "namespace": namespace, "model": benchmark.model,
            "endpoint_url": benchmark.endpoint.url, "artifact_dir": str(run_dir)}


def _render(value: Any, context: Mapping[str, Any], env: Any, *, coerce: bool) -> Any:
    if isinstance(value, str):
        if not any(m in value for m in _MARKERS):
            return value
        text = env.from_string(value).render(**context)
        return coerce_scalar(text) if coerce else text
    if isinstance(value, dict):
        return {k: _render(v, context, env, coerce=coerce) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, context, env, coerce=coerce) for v in value]
    return value


def render_user_file(entry: UserFile, context: Mapping[str, Any]) -> bytes:
    """The bytes of `entry`'s file; `ConfigError` naming it when a template does not render."""
    import jinja2

    try:
        content = _render(entry.content, context, jinja_environment(), coerce=entry.format != "text")
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"artifacts.user_files {entry.path!r}: {exc.message} (names: "
                          f"{', '.join(sorted(context))})") from None
    except jinja2.TemplateError as exc:
        raise ConfigError(f"artifacts.user_files {entry.path!r}: {exc}") from None
    if entry.format == "json":
        return json.dumps(content, indent=2, ensure_ascii=False).encode()
    if entry.format == "yaml":
        import yaml

        return yaml.safe_dump(content, sort_keys=False, default_flow_style=False, allow_unicode=True).encode()
    return str(content).encode()


def check_user_files(benchmark: Benchmark) -> None:
    """Render every user file with placeholder run names; `ConfigError` for the first that fails."""
    context = user_file_context(benchmark, run_dir="/artifacts", job_name="job", epoch="0")
    for entry in benchmark.artifacts.user_files:
        render_user_file(entry, context)


def write_user_files(benchmark: Benchmark, run_dir: str | os.PathLike[str], *, job_name: str | None = None,
                     namespace: str | None = None) -> list[str]:
    """Render and write `benchmark`'s user files into `run_dir` (`job_name`: by default the
    folder's name; `namespace`: by default `AIPERF_NAMESPACE`); returns their paths. `ConfigError`
    naming the file when one does not render, would land outside `run_dir` (a symbolic link) or
    cannot be written."""
    files = benchmark.artifacts.user_files
    if not files:
        return []
    root = Path(run_dir).resolve()
    context = user_file_context(benchmark, run_dir=root, job_name=job_name or root.name,
                                namespace=os.environ.get(NAMESPACE_ENV, "") if namespace is None else namespace)
    written = []
    for entry in files:
        data = render_user_file(entry, context)
        target = root / entry.path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.resolve().is_relative_to(root):
                raise ConfigError(f"artifacts.user_files {entry.path!r}: resolves outside the artifact folder")
            target.write_bytes(data)
        except OSError as exc:
            raise ConfigError(f"artifacts.user_files {entry.path!r}: {exc.strerror or exc}") from None
        written.append(entry.path)
    return written
