"""What AIPerf config v2 files and custom resources may compute before they are read: `${VAR}` /
`${VAR:default}` environment references and Jinja2 expressions over a `variables:` block.

`render_document(document, environ)` returns a new document:

1. Every string is searched for `${NAME}` and `${NAME:default}`; the variable's value (else the
   default, possibly empty) replaces the reference. A string that is one whole reference becomes a
   bool, int or float when its value reads as one (`${NUM_RUNS:3}` is the number 3). A name that
   is unset and has no default, or a `${` without its `}`, is a `ConfigError`.
2. When any string holds a Jinja2 expression (`{{ ... }}`) or statement (`{% ... %}`), the
   `variables:` block is resolved first, each variable rendered once its own references are
   (in dependency order, a cycle is an error), then every other string is rendered with these
   names in scope: the variables, the envelope's keys (`benchmark`, `random_seed`, ...), and the
   benchmark's own sections lifted to the top (`{{ phases.profiling.rate }}`: a list of named
   entries is also reachable by name). A rendered string that reads as a bool, int or float
   becomes one. An undefined name is an error, never an empty string.

Left as written for later: `artifacts.user_files` (rendered when the run starts, with the run's
own names: `aiperf.config.user_files`), and the fields named `template`, `body` and
`payload_template`. Templates run in Jinja2's immutable sandbox: a config file can compute, not
reach into Python.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from aiperf.config.errors import ConfigError

__all__ = ["coerce_scalar", "has_templates", "jinja_environment", "render_document", "render_string",
           "substitute_env"]

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}")
_UNTERMINATED = re.compile(r"\$\{[^}\n]*$")
_SKIP_FIELDS = frozenset({"template", "body", "payload_template"})
_SKIP_PATHS = (("benchmark", "artifacts", "user_files"), ("artifacts", "user_files"))


def coerce_scalar(text: str) -> bool | int | float | str:
    """`"true"`/`"false"` (any case) as bools, integers and floats as numbers, anything else
    unchanged: what a rendered value means."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _substitute(text: str, environ: Mapping[str, str], where: str) -> Any:
    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found is not None:
            return found
        if default is not None:
            return default
        raise ConfigError(f"{where + ': ' if where else ''}${{{name}}}: the environment variable is not set "
                          f"(give a default: ${{{name}:value}})")

    out = _ENV_REF.sub(value, text)
    if _UNTERMINATED.search(out):
        raise ConfigError(f"{where + ': ' if where else ''}{text!r}: '${{' without its closing '}}'")
    return coerce_scalar(out) if _ENV_REF.fullmatch(text) else out


def substitute_env(value: Any, environ: Mapping[str, str], where: str = "") -> Any:
    """`value` with every `${NAME}`/`${NAME:default}` in its strings replaced (see the module
    docstring); raises `ConfigError` naming the field for an unset variable without a default."""
    if isinstance(value, str):
        return _substitute(value, environ, where) if "${" in value else value
    if isinstance(value, dict):
        return {k: substitute_env(v, environ, _join(where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, environ, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _is_template(text: str) -> bool:
    return ("{{" in text and "}}" in text) or ("{%" in text and "%}" in text)


def has_templates(value: Any) -> bool:
    """Whether any string in `value` holds a Jinja2 expression or statement (or the start of one)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(has_templates(v) for v in value.values())
    if isinstance(value, list):
        return any(has_templates(v) for v in value)
    return False


def jinja_environment() -> Any:
    """The Jinja2 environment every template here renders in: an immutable sandbox, strict
    about unknown names, no autoescaping, trailing newlines kept."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


def render_string(text: str, context: Mapping[str, Any], where: str = "", *, env: Any = None) -> Any:
    """`text` rendered with `context` and coerced (`coerce_scalar`); a string without a template
    is returned as it is. Raises `ConfigError` naming `where` for a template that does not render
    (syntax, an undefined name, an unbalanced `{{`)."""
    import jinja2

    if ("{{" in text) != ("}}" in text) or ("{%" in text) != ("%}" in text):
        raise ConfigError(f"{where + ': ' if where else ''}{text!r}: an unbalanced Jinja2 '{{{{' or '{{%'")
    if not _is_template(text):
        return text
    try:
        rendered = (env or jinja_environment()).from_string(text).render(**context)
    except (jinja2.TemplateError, TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
        raise ConfigError(f"{where + ': ' if where else ''}{text!r}: {exc}") from None
    return coerce_scalar(rendered)


def _where(path: tuple[str, ...]) -> str:
    return "".join(p if p.startswith("[") or not i else f".{p}" for i, p in enumerate(path))


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _render(value: Any, context: Mapping[str, Any], path: tuple[str, ...], env: Any) -> Any:
    keys = tuple(_snake(p) for p in path if not p.startswith("["))
    if keys and (keys[-1] in _SKIP_FIELDS or any(keys[:len(p)] == p for p in _SKIP_PATHS)):
        return value
    if isinstance(value, str):
        return render_string(value, context, _where(path), env=env)
    if isinstance(value, dict):
        return {k: _render(v, context, (*path, str(k)), env) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, context, (*path, f"[{i}]"), env) for i, v in enumerate(value)]
    return value


def _named(value: Any) -> Any:
    """`value` with each list of named mappings also readable by name (`phases.profiling`)."""
    if isinstance(value, dict):
        return {k: _named(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_named(v) for v in value]
        if items and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
            return _NamedList(items)
        return items
    return value


class _NamedList(list[Any]):
    """A list whose entries are also attributes by their `name` (for `{{ phases.profiling.rate }}`)."""

    def __getattr__(self, name: str) -> Any:
        for item in self:
            if item.get("name") == name:
                return item
        raise AttributeError(name)


def _references(value: Any, names: set[str], env: Any) -> set[str]:
    from jinja2 import TemplateSyntaxError, meta

    if isinstance(value, str):
        if not _is_template(value):
            return set()
        try:
            return set(meta.find_undeclared_variables(env.parse(value))) & names
        except TemplateSyntaxError:
            return set()  # rendering reports it with the field's name
    if isinstance(value, dict):
        return set().union(*(_references(v, names, env) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_references(v, names, env) for v in value)) if value else set()
    return set()


def _resolve_variables(variables: dict[str, Any], base: dict[str, Any], env: Any) -> dict[str, Any]:
    pending = {name: _references(value, set(variables), env) - {name} for name, value in variables.items()}
    resolved: dict[str, Any] = {}
    while pending:
        ready = sorted(name for name, needs in pending.items() if not needs)
        if not ready:
            raise ConfigError(f"variables: {', '.join(sorted(pending))} refer to each other in a cycle")
        for name in ready:
            resolved[name] = _render(variables[name], {**base, **resolved}, ("variables", name), env)
            del pending[name]
            for needs in pending.values():
                needs.discard(name)
    return resolved


def render_document(document: Any, environ: Mapping[str, str]) -> Any:
    """`document` (a config file's envelope, a CR's `spec`, or a bare benchmark body) with its
    environment references substituted and its Jinja2 templates rendered (module docstring).
    Raises `ConfigError` naming the field."""
    document = substitute_env(document, environ)
    if not isinstance(document, dict) or not has_templates(document):
        return document
    env = jinja_environment()
    variables = document.get("variables") or {}
    if not isinstance(variables, dict):
        raise ConfigError("variables: must be a mapping of name -> value")
    body = document.get("benchmark")
    base: dict[str, Any] = {**_named(body if isinstance(body, dict) else {}),
                            **{k: _named(v) for k, v in document.items() if k != "variables"}}
    resolved = _resolve_variables(variables, base, env)
    context = {**base, **resolved, "variables": resolved}
    rendered = {k: _render(v, context, (k,), env) for k, v in document.items() if k != "variables"}
    if "variables" in document:
        rendered["variables"] = resolved
    return rendered
