"""`aiperf kube` config files: the starter file `kube init` writes, and how `--config FILE` is
read by `kube generate/profile`.

A config file is a YAML (or JSON) object whose keys are flag names without the leading `--`
(`total_workers` or `total-workers`), with the benchmark flags under `profile:`. It is applied
before cyclopts parses the command line: each value becomes its flag, unless the command line
gives that flag itself (flags override file values; a mapping flag given on the command line
replaces the file's mapping as a whole).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cyclopts import Parameter

from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import ProfileFlags

DEFAULT_CONFIG_FILE = "aiperf-kube.yaml"
CONFIG_COMMANDS = frozenset({"generate", "profile"})
"""The `aiperf kube` commands that take `--config`."""

TEMPLATE = """\
# aiperf kube configuration. Use it with
#   aiperf kube generate --config {file}      (prints the manifests)
#   aiperf kube profile --config {file}       (runs the benchmark)
# Keys are flag names without the leading -- ('_' or '-'); flags given on the command line
# override the values here. `aiperf kube profile --help` explains every flag.

# Run name: the objects are named aiperf-<name> (lowercase letters, digits and '-').
name: my-benchmark
# Namespace to deploy into. It must exist: aiperf never creates it.
namespace: {namespace}

# Images are <image_registry>/aiperf/<service>:<image_tag>.
image_registry: localhost
image_tag: latest
# Or one image for every container instead (leave image_registry/image_tag at their defaults):
# image: registry.example/aiperf/all:0.1.0

# Workers in total, split into worker pods of workers_per_pod (the last pod may hold fewer).
total_workers: 10
workers_per_pod: 10
# With many worker pods (docs/scale.md): each worker pod issues its own share of the credits,
# and its record-processors send their results aggregated, once, at the end.
# issuing: per_pod          # or central (the default)
# aggregation: sharded      # or records (the default)

# Per-container requests/limits by service type (default: requests = limits per service).
# resources:
#   worker: {{requests: {{cpu: "1", memory: 1Gi}}, limits: {{cpu: "1", memory: 1Gi}}}}

# Secrets reach the pods only as Secret references, SECRET/KEY:
# api_key_secret: llm-api/api-key        # needed with profile.api_key
# headers_secret: llm-headers/json       # a JSON object of headers; needed with profile.header
# env_from_secrets: {{HF_TOKEN: hf/token}}

# env_vars: {{AIPERF_LOG_FORMAT: json}}
# labels: {{team: perf}}
# annotations: {{owner: perf-team}}
# node_selector: {{nvidia.com/gpu.present: "false"}}
# tolerations: [{{key: dedicated, operator: Equal, value: bench, effect: NoSchedule}}]
# image_pull_secrets: [regcred]
# service_account: aiperf-runner

# Seconds after the run finishes before Kubernetes deletes its pods.
ttl_seconds: 300

# The benchmark: any `aiperf profile` flag by name (except workers_max: use total_workers).
profile:
  model: Qwen/Qwen3-0.6B
  url: http://vllm.default.svc.cluster.local:8000
  endpoint_type: chat
  streaming: true
  concurrency: 16
  request_count: 160
  isl: 550
  osl: 128
"""


def starter_config(path: str, namespace: str | None) -> str:
    """The text `kube init` writes to `path`: commented YAML, or JSON when `path` ends in .json
    (the same values without the comments)."""
    text = TEMPLATE.format(file=Path(path).name, namespace=namespace or "default")
    if path.endswith(".json"):
        import yaml

        return json.dumps(yaml.safe_load(text), indent=2) + "\n"
    return text


def write_starter_config(path: str, namespace: str | None, *, force: bool) -> Path:
    """Write the starter config to `path`; FlagError when it exists (unless `force`) or cannot
    be written."""
    target = Path(path)
    if target.exists() and not force:
        raise FlagError(f"--output {path}: the file exists; pass --force to overwrite it")
    try:
        target.write_text(starter_config(path, namespace))
    except OSError as exc:
        raise FlagError(f"--output {path}: {exc.strerror}") from None
    return target


# -- --config ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Field:
    flag: str           # the canonical spelling, e.g. --total-workers
    names: tuple[str, ...]  # every spelling the command line accepts
    kind: str           # "bool", "list" or "value"


def _fields(cls: type) -> dict[str, _Field]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, _Field] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        names: tuple[str, ...] = ()
        if typing.get_origin(hint) is typing.Annotated:
            base, *extras = typing.get_args(hint)
            for extra in extras:
                if isinstance(extra, Parameter) and extra.name:
                    names = tuple([extra.name] if isinstance(extra.name, str) else extra.name)
        else:
            base = hint
        args = typing.get_args(base)
        is_list = typing.get_origin(base) is list or any(typing.get_origin(a) is list for a in args)
        kind = "bool" if base is bool or set(args) == {bool, type(None)} else "list" if is_list else "value"
        dashed = "--" + field.name.replace("_", "-")
        names = names or (dashed,)
        if kind == "bool":
            names += tuple("--no-" + n.removeprefix("--") for n in names if n.startswith("--"))
        elif kind == "list":
            names += tuple("--empty-" + n.removeprefix("--") for n in names if n.startswith("--"))
        out[field.name] = _Field(names[0], names, kind)
    return out


def _given(argv: Sequence[str]) -> set[str]:
    """The option spellings present in `argv` (`--x=1` counts as `--x`; dotted mapping flags
    count as the flag)."""
    given: set[str] = set()
    for token in argv:
        if token == "--":
            break
        if token.startswith("-"):
            head = token.split("=", 1)[0]
            given.add(head)
            given.add(head.split(".", 1)[0])
    return given


def _tokens(spec: _Field, key: str, value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise FlagError(f"{where} {key}: expected true or false, not {value!r}")
        return [spec.flag] if value else ["--no-" + spec.flag.removeprefix("--")]
    if isinstance(value, dict):
        return [spec.flag, json.dumps(value)]
    if isinstance(value, list):
        if spec.kind != "list":
            raise FlagError(f"{where} {key}: expected one value, not a list")
        return [t for item in value
                for t in (spec.flag, json.dumps(item) if isinstance(item, dict | list) else str(item))]
    if isinstance(value, bool):
        return [spec.flag, "true" if value else "false"]
    return [spec.flag, str(value)]


def load_config(path: str) -> dict[str, Any]:
    """The object in YAML/JSON file `path`; FlagError (one line) when unreadable or not an object."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise FlagError(f"--config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise FlagError(f"--config {path}: not valid YAML or JSON{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FlagError(f"--config {path}: expected an object of flag names to values")
    return data


def config_tokens(path: str, argv: Sequence[str]) -> list[str]:
    """The flags that config file `path` adds to the command line `argv` (of `kube generate` or
    `kube profile`): one per key, except keys whose flag `argv` already gives.

    Raises FlagError for an unreadable file, an unknown key or a value of the wrong shape."""
    data = load_config(path)
    top = {**_fields(KubeTarget), **_fields(KubeDeployFlags)}
    top.pop("config")
    bench = _fields(ProfileFlags)
    given = _given(argv)
    out: list[str] = []

    def add(section: dict[str, _Field], items: dict[str, Any], where: str) -> None:
        for key, value in items.items():
            field = section.get(str(key).replace("-", "_"))
            if field is None:
                raise FlagError(f"{where}: unknown key {key!r}; keys are flag names without the "
                                "leading -- (see `aiperf kube profile --help`)")
            if given.isdisjoint(field.names):
                out.extend(_tokens(field, str(key), value, where))

    profile = data.get("profile") or {}
    if not isinstance(profile, dict):
        raise FlagError(f"--config {path}: profile must be an object of `aiperf profile` flags")
    add(top, {k: v for k, v in data.items() if k != "profile"}, f"--config {path}")
    add(bench, profile, f"--config {path} profile")
    return out


def prepare_kube_argv(argv: Sequence[str]) -> list[str]:
    """`argv` (starting with `kube`) as cyclopts must see it: dotted mapping flags rewritten
    (`--labels.team perf` -> `--labels team=perf`), and for `kube generate/profile --config FILE`
    the file's values added as flags the command line does not give. FlagError on a bad value."""
    from aiperf.cli.kube_flags import expand_dotted_flags

    args = expand_dotted_flags(argv)
    if len(args) >= 2 and args[1] in ("sweep", "generate"):  # comma lists on sweepable flags, as `aiperf profile`
        from aiperf.cli.sweep_options import prepare_profile_argv

        args = [*args[:2], *prepare_profile_argv(args[2:])]
    if len(args) < 2 or args[1] not in CONFIG_COMMANDS:
        return args
    path = None
    for i, token in enumerate(args):
        if token == "--":
            break
        if token == "--config":
            if i + 1 >= len(args):
                raise FlagError("--config: needs a file name")
            path = args[i + 1]
        elif token.startswith("--config="):
            path = token.split("=", 1)[1]
    if path is None:
        return args
    extra = expand_dotted_flags(config_tokens(path, args[2:]))
    return [*args[:2], *extra, *args[2:]]
