"""Reading a benchmark from a config document: AIPerf config v2 files (YAML or JSON) and the
CR's `spec.benchmark` alike.

`normalize` turns what users write into the canonical shape of `Benchmark`: the envelope
(`schemaVersion`, `benchmark`, `random_seed`) is unwrapped, camelCase keys become snake_case
(except inside the free-form maps `extra` and `headers`), and AIPerf's shorthands are expanded
(`model`, `dataset`, a single `phases` mapping, top-level `warmup`/`profiling`, `endpoint.url`,
`isl`/`osl` beside `prompts`, a bare number for a length, `"5m"` durations, `tokenizer` as a
string). Secret values (`endpoint.api_key`, `endpoint.headers`) are taken out into `Secrets`;
the document keeps the header names only. `decode_benchmark` validates, raising `ConfigError`
with one line that names the offending field.
"""

from __future__ import annotations

import base64
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

from aiperf.config.benchmark import Benchmark

__all__ = ["ConfigError", "Secrets", "decode_benchmark", "describe_error", "load_document", "normalize"]

FREE_FORM_KEYS = frozenset({"extra", "headers", "slos"})
"""Maps whose keys are data (request body fields, header names, metric tags), not field names."""

UNSUPPORTED_ENVELOPE = frozenset({"sweep", "multi_run", "variables", "plot", "no_sweep_table"})


class ConfigError(Exception):
    """A benchmark or run configuration that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Secrets:
    """What must never be written to disk: the API key and header values."""

    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def snake(key: str) -> str:
    """`maxTokens` -> `max_tokens`; snake_case keys are returned as they are."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower() if key[:1].islower() else key


def _snake_keys(value: Any) -> Any:
    if isinstance(value, list):
        return [_snake_keys(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[Any, Any] = {}
    for key, item in value.items():
        name = snake(key) if isinstance(key, str) else key
        out[name] = item if name in FREE_FORM_KEYS else _snake_keys(item)
    return out


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "ms": 0.001}


def parse_duration(value: Any) -> Any:
    """`300`, `"300"`, `"30s"`, `"5m"`, `"2h"`, `"500ms"` -> seconds; anything else unchanged (the
    model reports it)."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h)?\s*", value)
        if match:
            return float(match.group(1)) * _UNITS[match.group(2) or ""]
    return value


def _length(value: Any) -> Any:
    return {"mean": value} if isinstance(value, int | float) and not isinstance(value, bool) else value


def _dataset(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    data.setdefault("type", "file" if "path" in data else "synthetic")
    prompts = dict(data.get("prompts") or {})
    for key in ("isl", "osl"):
        if key in data:
            prompts[key] = data.pop(key)
    for key in ("isl", "osl"):
        if key in prompts:
            prompts[key] = _length(prompts[key])
    if prompts:
        data["prompts"] = prompts
    for key in ("turns",):
        if key in data:
            data[key] = _length(data[key])
    return data


def _phase(value: Any, name: str | None = None) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    if name is not None:
        data.setdefault("name", name)
    for key in ("duration", "grace_period"):
        if key in data:
            data[key] = parse_duration(data[key])
    return data


def split_credentials(url: str) -> tuple[str, str | None]:
    """(`url` without `user:password@`, the `Authorization: Basic` value they stand for, or None).
    Credentials are secrets: they must not reach run_config.json, manifests, exports or logs."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all: the model says so
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def _endpoint(value: Any, secrets: dict[str, Any]) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    if "url" in data:
        data["urls"] = data.pop("url")
    if isinstance(data.get("urls"), str):
        data["urls"] = [data["urls"]]
    if "api_key" in data:
        secrets["api_key"] = data.pop("api_key")
    headers = data.pop("headers", None)
    if isinstance(headers, dict):
        secrets["headers"] = {str(k): str(v) for k, v in headers.items()}
    if isinstance(data.get("urls"), list):
        clean = []
        for url in data["urls"]:
            url, authorization = split_credentials(url) if isinstance(url, str) else (url, None)
            clean.append(url)
            if authorization is not None:
                secrets.setdefault("headers", {})["Authorization"] = authorization
        data["urls"] = clean
    if secrets.get("headers"):
        data["header_names"] = sorted({*data.get("header_names", []), *secrets["headers"]})
    if "timeout" in data:
        data["timeout"] = parse_duration(data["timeout"])
    return data


def normalize(document: Any) -> tuple[dict[str, Any], Secrets]:
    """The canonical `Benchmark` document of `document` (an envelope or a bare `benchmark` body)
    and the secrets taken out of it. Raises `ConfigError` for a document that is not a mapping,
    an unknown `schemaVersion`, or envelope features we do not support yet (sweeps, multi-run,
    variables)."""
    if not isinstance(document, dict):
        raise ConfigError("a benchmark config must be a mapping (YAML or JSON object)")
    doc = _snake_keys(document)
    envelope_seed = None
    if "benchmark" in doc:
        version = str(doc.get("schema_version", "2.0"))
        if version not in ("2", "2.0"):
            raise ConfigError(f"schemaVersion {version!r}: only 2.0 is supported")
        unsupported = sorted(UNSUPPORTED_ENVELOPE & set(doc))
        if unsupported:
            raise ConfigError(f"{', '.join(unsupported)}: not supported yet (run one benchmark per file)")
        unknown = sorted(set(doc) - {"benchmark", "schema_version", "random_seed"} - UNSUPPORTED_ENVELOPE)
        if unknown:
            raise ConfigError(f"unknown top-level key(s) {', '.join(unknown)}; expected benchmark, "
                              "schemaVersion, random_seed")
        envelope_seed = doc.get("random_seed")
        doc = doc["benchmark"]
        if not isinstance(doc, dict):
            raise ConfigError("benchmark: must be a mapping")
    body = dict(doc)
    secrets: dict[str, Any] = {}
    if "model" in body:
        body["models"] = body.pop("model")
    if isinstance(body.get("models"), str):
        body["models"] = [body["models"]]
    if "dataset" in body:
        body["datasets"] = [body.pop("dataset")]
    if isinstance(body.get("datasets"), list):
        body["datasets"] = [_dataset(d) for d in body["datasets"]]
    shorthand = [k for k in ("warmup", "profiling") if k in body]
    if shorthand:
        if "phases" in body:
            raise ConfigError("phases and warmup/profiling: give the phases one way")
        body["phases"] = [_phase(body.pop(k), k) for k in shorthand]
    if isinstance(body.get("phases"), dict):
        body["phases"] = [_phase(body["phases"], "profiling")]
    elif isinstance(body.get("phases"), list):
        body["phases"] = [_phase(p) for p in body["phases"]]
    if "endpoint" in body:
        body["endpoint"] = _endpoint(body["endpoint"], secrets)
    if isinstance(body.get("tokenizer"), str):
        body["tokenizer"] = {"name": body["tokenizer"]}
    if envelope_seed is not None:
        body.setdefault("random_seed", envelope_seed)
    return body, Secrets(api_key=secrets.get("api_key"), headers=secrets.get("headers", {}))


def describe_error(exc: msgspec.ValidationError) -> tuple[str, str]:
    """(`where`, `what`) of a validation error: `where` the dotted field path (`phases[0].rate`,
    empty for the whole document; `slos (a key)` for a bad mapping key), `what` the reason in
    words."""
    text = str(exc)
    what, sep, where = text.rpartition(" - at `")
    if not sep:
        what, where = text, ""
    where = where.rstrip("`").removeprefix("$").lstrip(".")
    if where.startswith("key` in `"):  # an invalid mapping key: msgspec names the mapping
        where = where.removeprefix("key` in `$").lstrip(".") + " (a key)"
    if missing := re.fullmatch(r"Object missing required field `(\w+)`", what):
        return f"{where}.{missing.group(1)}".lstrip("."), "required"
    if field := re.fullmatch(r"(\w+): (.+)", what):  # a cross-field rule names its field first
        return f"{where}.{field.group(1)}".lstrip("."), field.group(2)
    what = re.sub(r'matching regex "\^https\?://[^"]*"', "in the form http(s)://host[:port][/path] "
                  "(a host, and a port in 0..65535)", what)
    what = re.sub(r'matching regex "([^"]*)"', r"matching \1", what)
    what = re.sub(r"Invalid enum value (.*)", r"unknown value \1", what)
    what = re.sub(r"Object contains unknown field `(\w+)`", r"unknown field '\1'", what)
    for name, words in (("int", "an integer"), ("float", "a number"), ("str", "a string"),
                        ("bool", "true or false"), ("array", "a list"), ("object", "a mapping")):
        what = what.replace(f"Expected `{name}`", f"expected {words}")
    return where, what


def decode_benchmark(document: dict[str, Any], *, source: str = "") -> Benchmark:
    """Validate a canonical document (see `normalize`) as a `Benchmark`; raises `ConfigError`
    `[<source>: ]<field path>: <reason>`. Numbers must be finite: `run_config.json` (JSON)
    cannot carry inf or nan."""
    try:
        benchmark = msgspec.convert(document, Benchmark)
    except msgspec.ValidationError as exc:
        where, what = describe_error(exc)
        prefix = "".join(f"{part}: " for part in (source, where) if part)
        raise ConfigError(f"{prefix}{what}") from None
    infinite = _non_finite(msgspec.to_builtins(benchmark))
    if infinite is not None:
        prefix = "".join(f"{part}: " for part in (source, infinite) if part)
        raise ConfigError(f"{prefix}expected a finite number")
    return benchmark


def _non_finite(node: Any, where: str = "") -> str | None:
    """The path (msgspec's form, `phases[1].duration`) of the first inf or nan in `node`, or None."""
    if isinstance(node, float):
        return None if math.isfinite(node) else where
    children = (node.items() if isinstance(node, dict)
                else enumerate(node) if isinstance(node, list) else ())
    for key, value in children:
        found = _non_finite(value, f"{where}[{key}]" if isinstance(key, int)
                            else f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


MAX_DOCUMENT_VALUES = 1_000_000
"""Most values a config file may hold once its YAML aliases are expanded (a "billion laughs"
file would otherwise exhaust memory)."""
MAX_DOCUMENT_DEPTH = 64
"""Deepest nesting of mappings and lists in a config file (the model itself is 6 deep)."""


def load_document(path: str | os.PathLike[str]) -> Any:
    """The parsed content of a YAML or JSON file; `ConfigError` when unreadable or malformed,
    when a YAML alias contains itself, when it nests deeper than `MAX_DOCUMENT_DEPTH` or when it
    expands to more than `MAX_DOCUMENT_VALUES` values."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            document = yaml.safe_load(fh)
    except OSError as exc:
        raise ConfigError(f"{os.fspath(path)}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{os.fspath(path)}: not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise ConfigError(f"{os.fspath(path)}: nested more than {MAX_DOCUMENT_DEPTH} deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{os.fspath(path)}: not valid YAML{where}") from None
    if (problem := _tree_problem(document)) is not None:
        raise ConfigError(f"{os.fspath(path)}: {problem}")
    return document


def _tree_problem(document: Any) -> str | None:
    """Why `document` is not a finite tree of bounded size (YAML aliases can make a value contain
    itself, or share one value so often that expanding it is huge), or None. Iterative: a deep
    document cannot exhaust the stack here."""
    count = 0
    stack: list[tuple[Any, frozenset[int]]] = [(document, frozenset())]
    while stack:
        node, ancestors = stack.pop()
        count += 1
        if count > MAX_DOCUMENT_VALUES:
            return f"more than {MAX_DOCUMENT_VALUES} values once its YAML aliases are expanded"
        if isinstance(node, dict | list):
            if id(node) in ancestors:
                return "a YAML alias contains itself"
            if len(ancestors) >= MAX_DOCUMENT_DEPTH:
                return f"nested more than {MAX_DOCUMENT_DEPTH} deep"
            inner = ancestors | {id(node)}
            stack.extend((child, inner) for child in (node.values() if isinstance(node, dict) else node))
    return None
