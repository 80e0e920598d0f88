"""Reading a benchmark from a config document: AIPerf config v2 files (YAML or JSON) and the
CR's `spec.benchmark` alike.

`read_document` parses a file and resolves its `${VAR}` references and Jinja2 templates
(`aiperf.config.templating`). `normalize` turns what users write into the canonical shape of
`Benchmark`: the envelope (`schemaVersion`, `benchmark`, `randomSeed`, `variables`) is
unwrapped, camelCase keys become snake_case (except inside free-form maps such as `extra` and
`headers`), and AIPerf's shorthands are expanded (`model`/`models` as a name, a list or
`{strategy, items}`, `dataset`, a single `phases` mapping, top-level `warmup`/`profiling`,
`endpoint.url`, URLs without a scheme, `isl`/`osl` beside `prompts`, every distribution shape,
`"5m"` durations, `tokenizer` as a string, `records`/`raw` as the export level, a URL for
`server_metrics`). AIPerf features we do not build are refused by name, or dropped when their
value asks for nothing (`aiperf.config.compat`). Secret values (`endpoint.api_key`,
`endpoint.headers`) are taken out into `Secrets`; the document keeps the header names only.
`decode_benchmark` validates, raising `ConfigError` with one line that names the offending field.
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

from aiperf.config.benchmark import Benchmark
from aiperf.config.compat import check_supported
from aiperf.config.errors import ConfigError
from aiperf.config.templating import render_document
from aiperf.config.user_files import check_user_files

__all__ = [
    "ConfigError", "Secrets", "decode_benchmark", "describe_error", "load_document", "normalize", "normalize_partial",
    "read_document",
    "with_scheme",
]

FREE_FORM_KEYS = frozenset({"extra", "headers", "slos", "variables", "content", "parameters", "annotations",
                            "labels", "node_selector"})
"""Maps whose keys are data (request body fields, header names, metric tags, template variables,
sweep paths), not field names."""

ENVELOPE_KEYS = frozenset({"benchmark", "schema_version", "random_seed", "variables", "no_sweep_table"})
"""Top-level keys of an AIPerf config v2 file this reader takes (besides `sweep:` and
`multi_run:`, which `aiperf.config.sweep.split_sweep_blocks` takes out first)."""

REDACTED = "<redacted>"
"""What AIPerf writes in place of a secret in a custom resource (the value is in a Secret)."""

ENDPOINT_KINDS = ("chat", "completions", "embeddings")
FILE_FORMATS = ("single_turn", "multi_turn", "mooncake_trace", "random_pool")
PHASE_TYPES = ("concurrency", "poisson", "gamma", "constant", "user_centric", "fixed_schedule")


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


def _not_supported(where: str, what: str, reason: str) -> ConfigError:
    return ConfigError(f"{where}: {what}: not supported ({reason})")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _length(value: Any, where: str) -> Any:
    """An AIPerf distribution (a number, `{value}`, `{mean, stddev}`, `{mean, median}`,
    `{peaks}`, `{points}`, with an optional `type`, `min`, `max`) as our `Length`."""
    if _number(value):
        return {"mean": value}
    if not isinstance(value, dict):
        return value
    data = dict(value)
    kind = data.pop("type", None)
    if kind is not None and kind not in ("fixed", "normal", "lognormal", "multimodal", "empirical"):
        raise ConfigError(f"{where}.type: unknown distribution {kind!r} "
                          "(fixed, normal, lognormal, multimodal, empirical)")
    if "value" in data:
        data["mean"] = data.pop("value")
    if isinstance(data.get("peaks"), list):
        data["peaks"] = [_peak(p, f"{where}.peaks[{i}]") for i, p in enumerate(data["peaks"])]
    return data


def _peak(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    weight = data.pop("weight", None)
    inner = data.pop("distribution") if "distribution" in data else data
    inner = _length(inner, where)
    if isinstance(inner, dict) and (inner.get("peaks") or inner.get("points")):
        raise _not_supported(where, "a mixture or empirical distribution inside a peak",
                             "peaks are normal or log-normal")
    out = dict(inner) if isinstance(inner, dict) else {"mean": inner}
    if weight is not None:
        out["weight"] = weight
    return out


def _sequence_entry(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    for key in ("isl", "osl"):
        spread = data.pop(f"{key}_stddev", None)
        if key in data:
            data[key] = _length(data[key], f"{where}.{key}")
            if spread is not None and isinstance(data[key], dict):
                data[key]["stddev"] = spread
    return data


def _dataset(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    data.setdefault("type", "file" if "path" in data or "records" in data else "synthetic")
    if data["type"] == "public":
        raise _not_supported(f"{where}.type", "public", "public datasets (sharegpt, ...) are not built: "
                             "they download from Hugging Face; give the file as a file dataset")
    prompts = dict(data.get("prompts") or {})
    for key in ("isl", "osl", "block_size"):
        if key in data:
            prompts[key] = data.pop(key)
    for key in ("isl", "osl"):
        if key in prompts:
            prompts[key] = _length(prompts[key], f"{where}.prompts.{key}")
    if isinstance(prompts.get("sequence_distribution"), list):
        prompts["sequence_distribution"] = [_sequence_entry(e, f"{where}.prompts.sequence_distribution[{i}]")
                                            for i, e in enumerate(prompts["sequence_distribution"])]
    if prompts:
        data["prompts"] = prompts
    if "turns" in data:
        data["turns"] = _length(data["turns"], f"{where}.turns")
    if isinstance(data.get("images"), dict):
        images = data["images"] = dict(data["images"])
        for key in ("width", "height"):
            if key in images:
                images[key] = _length(images[key], f"{where}.images.{key}")
        if images.get("source", "noise") != "noise":
            raise _not_supported(f"{where}.images.source", repr(images["source"]),
                                 "synthetic images are random noise (source: noise)")
    if isinstance(data.get("audio"), dict):
        audio = data["audio"] = dict(data["audio"])
        if "length" in audio:
            audio["length"] = _length(audio["length"], f"{where}.audio.length")
        if audio.get("format", "wav") != "wav":
            raise _not_supported(f"{where}.audio.format", repr(audio["format"]), "synthetic audio is WAV")
    if data["type"] == "file":
        for key in ("images", "audio"):
            if key in data and (not isinstance(data[key], dict) or data[key].get("batch_size", 0)):
                raise _not_supported(f"{where}.{key}", f"synthetic {key} in a file dataset",
                                     "a file's turns give their own")
            data.pop(key, None)
    if _number(data.get("turn_delay")):
        data["turn_delay"] = {"mean": data["turn_delay"]}
    fmt = data.get("format")
    if data["type"] == "file" and isinstance(fmt, str) and fmt not in FILE_FORMATS:
        raise _not_supported(f"{where}.format", repr(fmt), f"the file formats are {', '.join(FILE_FORMATS)}")
    if data.get("sampling") not in (None, "sequential"):
        raise _not_supported(f"{where}.sampling", repr(data["sampling"]),
                             "conversations are sent in order (sequential)")
    return data


def _ramp(value: Any) -> Any:
    """A ramp: a number or duration string is its duration (AIPerf's shorthand)."""
    if value is None or isinstance(value, dict):
        return value if value is None else {**value, **(
            {"duration": parse_duration(value["duration"])} if "duration" in value else {})}
    return {"duration": parse_duration(value)}


def _phase(value: Any, where: str, name: str | None = None) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    if name is not None:
        data.setdefault("name", name)
    if data.get("kind") is None and data.get("name", "profiling") in ("warmup", "profiling"):
        data.pop("kind", None)
    for key in ("duration", "grace_period"):
        if key in data:
            data[key] = parse_duration(data[key])
            if data[key] in ("inf", "infinity") or (_number(data[key]) and math.isinf(data[key])):
                raise _not_supported(f"{where}.{key}", "inf", "give a finite number of seconds")
    for key in ("concurrency_ramp", "rate_ramp", "prefill_ramp"):
        if key in data:
            data[key] = _ramp(data[key])
    if "prefill_ramp" in data and data.get("prefill_concurrency") is None:
        del data["prefill_ramp"]  # it ramps prefill_concurrency: without one it does nothing (AIPerf's reading)
    kind = data.get("type")
    if isinstance(kind, str) and kind not in PHASE_TYPES:
        raise _not_supported(f"{where}.type", repr(kind), f"the phase types are {', '.join(PHASE_TYPES)}")
    return data


def _phases(body: dict[str, Any]) -> None:
    shorthand = [k for k in ("warmup", "profiling") if k in body]
    if shorthand:
        if "phases" in body:
            raise ConfigError("phases and warmup/profiling: give the phases one way")
        if shorthand == ["warmup"]:
            raise ConfigError("warmup: needs a profiling phase (a warmup alone has no results)")
        body["phases"] = [_phase(body.pop(k), k, k) for k in shorthand]
    elif isinstance(body.get("phases"), dict):
        body["phases"] = [_phase(body["phases"], "phases", "profiling")]
    elif isinstance(body.get("phases"), list):
        body["phases"] = [_phase(p, f"phases[{i}]") for i, p in enumerate(body["phases"])]


def _models(body: dict[str, Any]) -> None:
    if "model" in body:
        if "models" in body:
            raise ConfigError("model and models: give the models one way")
        body["models"] = body.pop("model")
    models = body.get("models")
    if isinstance(models, str):
        models = {"items": [{"name": models}]}
    elif isinstance(models, list):
        models = {"items": [{"name": m} if isinstance(m, str) else m for m in models]}
    if isinstance(models, dict):
        body["models"] = models


def _canonical_models(body: dict[str, Any]) -> None:
    """`models: {strategy, items}` (checked) as our list of names and `model_selection`."""
    models = body.get("models")
    if not isinstance(models, dict):
        return
    items = models.get("items")
    strategy = models.get("strategy", "round_robin")
    if isinstance(strategy, str):
        strategy = strategy.lower()
    if strategy not in ("round_robin", "random", "weighted"):
        raise ConfigError(f"models.strategy: unknown value {strategy!r} (round_robin, random, weighted)")
    if set(models) - {"items", "strategy"}:
        raise ConfigError(f"models: unknown field(s) {', '.join(sorted(set(models) - {'items', 'strategy'}))}")
    if not isinstance(items, list):
        body["models"] = items
        return
    names, weights = [], []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"name", "weight"}:
            raise ConfigError(f"models.items[{index}]: expected {{name, weight}}")
        names.append(item.get("name"))
        weights.append(item.get("weight"))
    body["models"] = names
    selection: dict[str, Any] = {**body.get("model_selection", {})} \
        if isinstance(body.get("model_selection"), dict) else {}
    if "strategy" in models or strategy != "round_robin":
        selection["strategy"] = strategy
    if None not in weights:
        selection["weights"] = weights
    elif strategy == "weighted":  # weights only some models carry do nothing elsewhere (AIPerf's rule)
        missing = next(i for i, w in enumerate(weights) if w is None)
        raise ConfigError(f"models.items[{missing}].weight: the weighted strategy needs a weight for every model")
    if selection:
        body["model_selection"] = selection


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


def with_scheme(url: str) -> str:
    """`url` with `http://` in front when it names no scheme (AIPerf's rule)."""
    return url if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url) else f"http://{url}"


def _endpoint(value: Any, secrets: dict[str, Any]) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    if "url" in data:
        if "urls" in data:
            raise ConfigError("endpoint.url and endpoint.urls: give the URLs one way")
        data["urls"] = data.pop("url")
    if isinstance(data.get("urls"), str):
        data["urls"] = [data["urls"]]
    api_key = data.pop("api_key", None)
    if api_key is not None and api_key != REDACTED:
        secrets["api_key"] = api_key
    headers = data.pop("headers", None)
    if isinstance(headers, dict):
        secrets["headers"] = {str(k): str(v) for k, v in headers.items()}
    if isinstance(data.get("urls"), list):
        clean = []
        for url in data["urls"]:
            url, authorization = split_credentials(with_scheme(url)) if isinstance(url, str) else (url, None)
            clean.append(url)
            if authorization is not None:
                secrets.setdefault("headers", {})["Authorization"] = authorization
        data["urls"] = clean
    if secrets.get("headers"):
        data["header_names"] = sorted({*data.get("header_names", []), *secrets["headers"]})
    if "timeout" in data:
        data["timeout"] = parse_duration(data["timeout"])
    kind = data.get("type")
    if isinstance(kind, str) and kind not in ENDPOINT_KINDS:
        raise _not_supported("endpoint.type", repr(kind), f"the endpoint types are {', '.join(ENDPOINT_KINDS)}")
    return data


def _artifacts(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    data = dict(value)
    summary = data.pop("summary", None)
    if summary is False or summary == []:
        raise _not_supported("artifacts.summary", "false", "the JSON summary is always written")
    if isinstance(summary, list) and set(summary) - {"json", "csv"}:
        raise ConfigError(f"artifacts.summary: unknown format(s) {sorted(set(summary) - {'json', 'csv'})} (json)")
    records = data.pop("records", None)
    if isinstance(records, list) and set(records) - {"jsonl"}:
        raise ConfigError(f"artifacts.records: unknown format(s) {sorted(set(records) - {'jsonl'})} (jsonl)")
    raw = data.pop("raw", None)
    if raw or records is False or records == []:
        if "export_level" in data:
            raise ConfigError("artifacts.export_level and records/raw: give the export level one way")
        data["export_level"] = "raw" if raw else "summary"
    if "slice_duration" in data:
        data["slice_duration"] = parse_duration(data["slice_duration"])
    if isinstance(data.get("user_files"), list):  # AIPerf's default format: text for a string, else json
        data["user_files"] = [{**f, "format": "text" if isinstance(f.get("content"), str) else "json"}
                              if isinstance(f, dict) and f.get("format") is None else f for f in data["user_files"]]
    return data


def _metrics_block(value: Any) -> Any:
    """`server_metrics`/`gpu_telemetry`: a URL or list of URLs as `{urls}`, `url` as `urls`."""
    if isinstance(value, str):
        return {"urls": [value]}
    if isinstance(value, list):
        return {"urls": value}
    if isinstance(value, dict) and "url" in value:
        data = {k: v for k, v in value.items() if k != "url"}
        data["urls"] = [*data.get("urls", []), *([value["url"]] if isinstance(value["url"], str) else value["url"])]
        return data
    return value


_LOG_LEVELS = {"trace": "debug", "debug": "debug", "info": "info", "notice": "info", "success": "info",
               "warning": "warning", "error": "error", "critical": "error"}


def _body(doc: dict[str, Any], secrets: dict[str, Any]) -> dict[str, Any]:
    """AIPerf's shorthands of a snake_case benchmark body expanded (still AIPerf's shape)."""
    body = dict(doc)
    _models(body)
    if "dataset" in body:
        if "datasets" in body:
            raise ConfigError("dataset and datasets: give the datasets one way")
        body["datasets"] = [{"name": "default", **body.pop("dataset")} if isinstance(body["dataset"], dict)
                            else body.pop("dataset")]
    if isinstance(body.get("datasets"), list):
        body["datasets"] = [_dataset(d, f"datasets[{i}]") for i, d in enumerate(body["datasets"])]
        if len(body["datasets"]) > 1:
            raise _not_supported("datasets", f"{len(body['datasets'])} datasets", "one dataset per benchmark")
    _phases(body)
    if "endpoint" in body:
        body["endpoint"] = _endpoint(body["endpoint"], secrets)
    if "artifacts" in body:
        body["artifacts"] = _artifacts(body["artifacts"])
    for key in ("server_metrics", "gpu_telemetry"):
        if key in body:
            body[key] = _metrics_block(body[key])
    formats = (body.get("server_metrics") or {}).get("formats") if isinstance(body.get("server_metrics"), dict) \
        else None
    if isinstance(formats, list) and set(formats) - {"json", "csv"}:
        raise _not_supported("server_metrics.formats", ", ".join(sorted(set(formats) - {"json", "csv"})),
                             "server metrics are written as json and csv")
    if isinstance(body.get("tokenizer"), str):
        body["tokenizer"] = {"name": body["tokenizer"]}
    logging = body.get("logging")
    if isinstance(logging, dict) and isinstance(logging.get("level"), str):
        level = logging["level"].lower()
        body["logging"] = {**logging, "level": _LOG_LEVELS.get(level, level)}
    return body


def normalize(document: Any) -> tuple[dict[str, Any], Secrets]:
    """The canonical `Benchmark` document of `document` (an envelope or a bare `benchmark` body,
    already rendered: `aiperf.config.templating`) and the secrets taken out of it. Raises
    `ConfigError` (one line) for a document that is not a mapping, an unknown `schemaVersion`,
    a `sweep:`/`multi_run:` block (the caller's, see `aiperf.config.sweep.split_sweep_blocks`),
    and any AIPerf feature we do not build (`aiperf.config.compat`)."""
    if not isinstance(document, dict):
        raise ConfigError("a benchmark config must be a mapping (YAML or JSON object)")
    doc = _snake_keys(document)
    envelope_seed = variables = None
    if "benchmark" in doc:
        version = str(doc.get("schema_version", "2.0"))
        if version not in ("2", "2.0"):
            raise ConfigError(f"schemaVersion {version!r}: only 2.0 is supported")
        blocks = sorted({"sweep", "multi_run"} & set(doc))
        if blocks:
            raise ConfigError(f"{', '.join(blocks)}: a plan of several runs is read by `aiperf profile "
                              "--config` and `aiperf config expand`, not here")
        if doc.get("plot") not in (None, {}):
            raise _not_supported("plot", "a plot block", "`aiperf plot` draws its fixed set of plots; "
                                 "plot configuration is not built")
        unknown = sorted(set(doc) - ENVELOPE_KEYS - {"plot"})
        if unknown:
            raise ConfigError(f"unknown top-level key(s) {', '.join(unknown)}; expected benchmark, "
                              "schemaVersion, randomSeed, variables, sweep, multiRun")
        envelope_seed = doc.get("random_seed")
        variables = doc.get("variables")
        doc = doc["benchmark"]
        if not isinstance(doc, dict):
            raise ConfigError("benchmark: must be a mapping")
    secrets: dict[str, Any] = {}
    body = _body(doc, secrets)
    check_supported(body)
    _canonical_models(body)
    if envelope_seed is not None:
        body.setdefault("random_seed", envelope_seed)
    if variables and (body.get("artifacts") or {}).get("user_files"):
        body.setdefault("variables", variables)  # what the user files render with, at the run's start
    return body, Secrets(api_key=secrets.get("api_key"), headers=secrets.get("headers", {}))


def normalize_partial(document: dict[str, Any]) -> dict[str, Any]:
    """`normalize` of a benchmark body that may be partial (a scenario's overlay) or already
    canonical (idempotent); it must carry no secrets (those belong to the base benchmark)."""
    body, secrets = normalize(document)
    if secrets.api_key is not None or secrets.headers:
        raise ConfigError("endpoint.api_key/headers: give secrets in the base benchmark, not in a variation")
    return body


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
    if benchmark.artifacts.user_files:
        try:
            check_user_files(benchmark)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}" if source else str(exc)) from None
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


def read_document(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Any:
    """`load_document(path)` with its `${VAR}` references and Jinja2 templates resolved
    (`aiperf.config.templating.render_document`, the environment `environ`, by default the
    process's): what a config file means. `ConfigError` names the file and the field."""
    document = load_document(path)
    try:
        return render_document(document, os.environ if environ is None else environ)
    except ConfigError as exc:
        raise ConfigError(f"{os.fspath(path)}: {exc}") from None


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
