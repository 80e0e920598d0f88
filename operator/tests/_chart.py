"""Renders the Helm chart without helm (imported as a top-level test module).

No helm binary can be installed on these machines (none in the Debian, PyPI or npm registries),
so the chart keeps to a subset of Go templates that a few lines render exactly like
`helm template`: whole-action lookups `{{ .Values.a.b }}`, `{{ .Release.Namespace }}` and
`{{ .Release.Name }}`, always inside a quoted YAML string or as a whole scalar. `render` refuses
any other action (a conditional, a pipe, a function), so the chart cannot drift into templates
this renderer would get wrong.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

_ACTION = re.compile(r"\{\{(.*?)\}\}")
_LOOKUP = re.compile(r"\s*\.(Values(?:\.[A-Za-z_][A-Za-z0-9_]*)+|Release\.Namespace|Release\.Name)\s*")


class TemplateError(Exception):
    """The chart uses a template construct the renderer does not support, or a missing value."""


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def values(chart: Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chart's `values.yaml` with `overrides` merged in (as `helm --set` would)."""
    base: dict[str, Any] = yaml.safe_load((chart / "values.yaml").read_text())
    return _merge(base, overrides or {})


def render_text(text: str, *, vals: dict[str, Any], namespace: str, release: str) -> str:
    """`text` with every action replaced; raises `TemplateError` for anything but a lookup of a
    scalar value."""
    def replace(match: re.Match[str]) -> str:
        lookup = _LOOKUP.fullmatch(match.group(1))
        if lookup is None:
            raise TemplateError(f"unsupported template action {match.group(0)!r}")
        path = lookup.group(1)
        if path == "Release.Namespace":
            return namespace
        if path == "Release.Name":
            return release
        value: Any = vals
        for key in path.split(".")[1:]:
            if not isinstance(value, dict) or key not in value:
                raise TemplateError(f"{match.group(0)}: no such value")
            value = value[key]
        if isinstance(value, dict | list) or value is None:
            raise TemplateError(f"{match.group(0)}: not a scalar ({value!r})")
        return str(value).lower() if isinstance(value, bool) else str(value)
    return _ACTION.sub(replace, text)


def render(chart: Path, *, namespace: str = "aiperf-system", release: str = "aiperf-operator",
           overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every object of `templates/*.yaml`, in file order (what `helm template` prints, CRDs
    excluded)."""
    vals = values(chart, overrides)
    objects: list[dict[str, Any]] = []
    for path in sorted((chart / "templates").glob("*.yaml")):
        text = render_text(path.read_text(), vals=vals, namespace=namespace, release=release)
        objects += [doc for doc in yaml.safe_load_all(text) if doc is not None]
    return objects


def crds(chart: Path) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions in `crds/` (installed by helm before the templates)."""
    return [yaml.safe_load(p.read_text()) for p in sorted((chart / "crds").glob("*.yaml"))]
