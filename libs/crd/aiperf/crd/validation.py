"""Offline checks of the CRDs and of AIPerfJob/AIPerfSweep documents, as the API server would
make them (no cluster needed): what `aiperf kube validate` runs, and what the tests prove the CRDs
with.

- `structural_problems(schema)`: is an OpenAPI schema structural in our (strict) sense: a type on
  every node, no `$ref`/`anyOf`/`oneOf`/`allOf`/`not`, `x-kubernetes-preserve-unknown-fields`
  only with `type: object`, `properties` and `additionalProperties` never together, only keywords
  Kubernetes knows, CEL rules that name declared fields only.
- `SchemaValidator(openAPIV3Schema).problems(obj, old)`: the schema (via `to_jsonschema`, strict
  about unknown fields like `kubectl --validate=strict`), then every CEL rule compiled with
  cel-python and evaluated on its node, transition rules against `old` when given.
- `validate_resource(doc, old)`: one CR against the generated CRD of its kind, plus metadata and a
  final decode with the typed models (`decode_spec`: the envelope, a difference between CEL and
  model still surfaces; and `spec.benchmark`, which the CRD keeps as written, read as the
  operator reads it).

Every check returns `Problem`s (path, message); nothing here raises for a bad document.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiperf.config import ConfigError
from aiperf.config.templating import render_document
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND, SWEEP_KIND, decode_spec, read_benchmark
from aiperf.kube.names import is_dns1123_label, jobset_name, sweep_name_problem

__all__ = [
    "Problem", "SchemaValidator", "apply_defaults", "structural_problems", "to_jsonschema",
    "validate_resource", "validator_for",
]

KINDS = (JOB_KIND, SWEEP_KIND)

# JSONSchemaProps of apiextensions.k8s.io/v1 (what a CRD schema may say at all).
_K8S_KEYWORDS = frozenset({
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties", "minProperties", "required", "items",
    "allOf", "oneOf", "anyOf", "not", "properties", "additionalProperties", "patternProperties",
    "dependencies", "additionalItems", "definitions", "externalDocs", "example", "nullable",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations",
})
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_RULE_KEYS = frozenset({"rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"})
_FIELD_REF = re.compile(r"\b(?:self|oldSelf)\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong: where (`spec.benchmark.phases[0].kind`, empty for the document) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


# -- the CRD schemas themselves ----------------------------------------------------------------

def structural_problems(schema: dict[str, Any], where: str = "") -> list[str]:
    """What makes `schema` (an `openAPIV3Schema` or any node of one) not structural in our sense,
    one line each (empty: fine)."""
    out: list[str] = []
    here = where or "<root>"
    unknown = set(schema) - _K8S_KEYWORDS
    if unknown:
        out.append(f"{here}: keywords Kubernetes does not know: {sorted(unknown)}")
    for junctor in ("$ref", "anyOf", "oneOf", "allOf", "not", "patternProperties", "definitions",
                    "dependencies", "additionalItems"):
        if junctor in schema:
            out.append(f"{here}: {junctor} is not allowed")
    kind = schema.get("type")
    if not schema.get("x-kubernetes-int-or-string") and kind not in _TYPES:
        out.append(f"{here}: needs a type (got {kind!r})")
    if schema.get("x-kubernetes-preserve-unknown-fields") is not None:
        if schema["x-kubernetes-preserve-unknown-fields"] is not True or kind != "object":
            out.append(f"{here}: x-kubernetes-preserve-unknown-fields: true only with type: object")
    for flag in ("exclusiveMinimum", "exclusiveMaximum", "nullable"):
        if flag in schema and not isinstance(schema[flag], bool):
            out.append(f"{here}: {flag} must be a boolean")
    if "default" in schema and schema["default"] is None:
        out.append(f"{here}: default: null")
    if "enum" in schema and kind in _TYPES:
        bad = [v for v in schema["enum"] if not _is_type(v, kind)]
        if bad:
            out.append(f"{here}: enum values {bad!r} are not of type {kind}")
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    if props is not None and extra is not None:
        out.append(f"{here}: properties and additionalProperties together")
    if extra is not None and not isinstance(extra, dict):
        out.append(f"{here}: additionalProperties must be a schema, not {extra!r}")
    if kind != "object" and (props is not None or extra is not None):
        out.append(f"{here}: properties on a {kind}")
    missing = sorted(set(schema.get("required", ())) - set(props or {}))
    if missing:
        out.append(f"{here}: required names undeclared properties {missing}")
    if kind == "array":
        if not isinstance(schema.get("items"), dict):
            out.append(f"{here}: an array needs one items schema")
        out += _list_type_problems(schema, here)
    elif "items" in schema:
        out.append(f"{here}: items on a {kind}")
    out += _rule_problems(schema, here)
    for name, sub in (props or {}).items():
        out += structural_problems(sub, f"{where}.{name}")
    if isinstance(extra, dict):
        out += structural_problems(extra, f"{where}.*")
    if isinstance(schema.get("items"), dict):
        out += structural_problems(schema["items"], f"{where}[]")
    return out


def _is_type(value: Any, kind: str) -> bool:
    return {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[kind]


def _list_type_problems(schema: dict[str, Any], here: str) -> list[str]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is None:
        return []
    if list_type not in ("atomic", "set", "map"):
        return [f"{here}: x-kubernetes-list-type {list_type!r}"]
    if list_type != "map":
        return []
    items = schema.get("items", {})
    keys = schema.get("x-kubernetes-list-map-keys") or []
    out = [] if keys else [f"{here}: a map list needs x-kubernetes-list-map-keys"]
    for key in keys:
        prop = items.get("properties", {}).get(key)
        if prop is None or prop.get("type") not in ("string", "integer", "boolean"):
            out.append(f"{here}: list map key {key!r} must be a scalar property")
        elif key not in items.get("required", ()) and "default" not in prop:
            out.append(f"{here}: list map key {key!r} must be required")
    return out


def _rule_problems(schema: dict[str, Any], here: str) -> list[str]:
    out: list[str] = []
    declared = set(schema.get("properties", {}))
    for entry in schema.get("x-kubernetes-validations", ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("rule"), str):
            out.append(f"{here}: a validation without a rule: {entry!r}")
            continue
        if set(entry) - _RULE_KEYS:
            out.append(f"{here}: validation keys Kubernetes does not know: {sorted(set(entry) - _RULE_KEYS)}")
        if schema.get("type") == "object" and "properties" in schema:
            undeclared = sorted({m for m in _FIELD_REF.findall(entry["rule"])} - declared)
            if undeclared:
                out.append(f"{here}: rule {entry['rule']!r} names undeclared field(s) {undeclared}")
        field_path = entry.get("fieldPath")
        if field_path and field_path.lstrip(".").split(".")[0] not in declared:
            out.append(f"{here}: fieldPath {field_path!r} names no declared field")
    return out


# -- JSON Schema for validation ----------------------------------------------------------------

def to_jsonschema(node: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema (draft 4: boolean `exclusiveMinimum`, like OpenAPI v3.0) that accepts what
    the API server accepts for `node`, strict about unknown fields: `nullable` becomes a `null`
    type, an object with `properties` and no `x-kubernetes-preserve-unknown-fields` gets
    `additionalProperties: false`, Kubernetes' extensions are dropped."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "description", "default"):
            continue
        if key == "properties":
            out[key] = {k: to_jsonschema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_jsonschema(value)
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [*(out["type"] if isinstance(out["type"], list) else [out["type"]]), "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """A copy of `value` with the schema's defaults filled in where a field is absent, as the API
    server's structural defaulting does."""
    if isinstance(value, dict) and schema.get("type") == "object":
        out = dict(value)
        for name, sub in schema.get("properties", {}).items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = apply_defaults(out[name], sub)
        if isinstance(schema.get("additionalProperties"), dict):
            out = {k: apply_defaults(v, schema["additionalProperties"]) for k, v in out.items()}
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


# -- schema + CEL --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rule:
    entry: dict[str, Any]
    program: Any
    transition: bool


def _cel_value(value: Any, schema: dict[str, Any]) -> Any:
    """`value` as the API server hands it to CEL: `number` fields are doubles even when written
    as integers (cel-python would keep 1 an int, and `1 == 1.0` is no overload there)."""
    kind = schema.get("type")
    if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == "object" and isinstance(value, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        if props is not None:
            return {k: _cel_value(v, props[k]) if k in props else v for k, v in value.items()}
        if isinstance(extra, dict):
            return {k: _cel_value(v, extra) for k, v in value.items()}
        return value
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_cel_value(v, schema["items"]) for v in value]
    return value


def _path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{base}.{key}" if base else key
    return f"{base}[{key!r}]"


class SchemaValidator:
    """Validates objects against one `openAPIV3Schema`: the schema, then its CEL rules (compiled
    once, here; a rule that does not compile raises `ValueError`: that is a broken CRD)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        import celpy
        import jsonschema

        self.schema = schema
        self._json = jsonschema.Draft4Validator(to_jsonschema(schema))
        self._env = celpy.Environment()
        self._rules: dict[int, list[_Rule]] = {}
        self._verdicts: dict[tuple[int, str, str], bool] = {}
        self._compile(schema, "")

    def _compile(self, node: dict[str, Any], where: str) -> None:
        import celpy

        compiled = []
        for entry in node.get("x-kubernetes-validations", ()):
            try:
                program = self._env.program(self._env.compile(entry["rule"]))
            except celpy.CELParseError as exc:
                raise ValueError(f"{where or '<root>'}: CEL rule {entry['rule']!r} does not compile: {exc}") from None
            compiled.append(_Rule(entry, program, re.search(r"\boldSelf\b", entry["rule"]) is not None))
        if compiled:
            self._rules[id(node)] = compiled
        for name, sub in node.get("properties", {}).items():
            self._compile(sub, _path(where, name))
        for key in ("additionalProperties", "items"):
            if isinstance(node.get(key), dict):
                self._compile(node[key], f"{where}.{key}")

    def rules(self) -> Iterator[tuple[dict[str, Any], Any]]:
        """Every compiled rule: (its `x-kubernetes-validations` entry, the celpy program)."""
        for compiled in self._rules.values():
            for rule in compiled:
                yield rule.entry, rule.program

    def problems(self, obj: Any, old: Any = None) -> list[Problem]:
        """Everything wrong with `obj` (an update of `old` when `old` is given), sorted."""
        out = [Problem(_json_path(err), _json_message(err)) for err in self._json.iter_errors(obj)]
        self._cel(self.schema, obj, old, old is not None, "", out)
        return sorted(set(out))

    def _cel(self, node: dict[str, Any], value: Any, old: Any, has_old: bool, where: str,
             out: list[Problem]) -> None:
        if value is None:
            return
        for rule in self._rules.get(id(node), ()):
            if rule.transition and not has_old:
                continue
            if not self._holds(rule, node, value, old):
                field = rule.entry.get("fieldPath", "").lstrip(".")
                out.append(Problem(_path(where, field) if field else where, rule.entry["message"]))
        kind = node.get("type")
        if kind == "object" and isinstance(value, dict):
            props, extra = node.get("properties"), node.get("additionalProperties")
            children = props.items() if props is not None else (
                ((k, extra) for k in value) if isinstance(extra, dict) else ())
            for name, sub in children:
                if name in value:
                    sub_old = old.get(name) if has_old and isinstance(old, dict) else None
                    self._cel(sub, value[name], sub_old, has_old and isinstance(old, dict) and name in old,
                              _path(where, name), out)
        elif kind == "array" and isinstance(value, list) and isinstance(node.get("items"), dict):
            keys = node.get("x-kubernetes-list-map-keys") if node.get("x-kubernetes-list-type") == "map" else None
            by_key = ({tuple(item.get(k) for k in keys): item for item in old if isinstance(item, dict)}
                      if keys and has_old and isinstance(old, list) else {})
            for index, item in enumerate(value):
                match = by_key.get(tuple(item.get(k) for k in keys)) if keys and isinstance(item, dict) else None
                self._cel(node["items"], item, match, match is not None, _path(where, index), out)
            if keys:
                seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
                if len(set(seen)) != len(seen):
                    out.append(Problem(where, f"duplicate entries for key(s) {', '.join(keys)}"))

    def _holds(self, rule: _Rule, node: dict[str, Any], value: Any, old: Any) -> bool:
        import celpy

        new_value = _cel_value(value, node)
        old_value = _cel_value(old, node) if rule.transition else None
        # cel-python interprets its parse tree (~10 ms a rule): remember verdicts of equal inputs.
        key = (id(rule), json.dumps(new_value, sort_keys=True, default=str),
               json.dumps(old_value, sort_keys=True, default=str))
        if key in self._verdicts:
            return self._verdicts[key]
        activation = {"self": celpy.json_to_cel(new_value)}
        if rule.transition:
            activation["oldSelf"] = celpy.json_to_cel(old_value)
        try:
            result = rule.program.evaluate(activation)
            verdict = isinstance(result, celpy.celtypes.BoolType) and bool(result)
        except Exception:  # an evaluation error rejects the object, as in the API server
            verdict = False
        if len(self._verdicts) > 50_000:
            self._verdicts.clear()
        self._verdicts[key] = verdict
        return verdict


def _json_path(err: Any) -> str:
    path = ""
    for part in err.absolute_path:
        path = _path(path, part)
    return path


def _json_message(err: Any) -> str:
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return f"unknown field(s) {', '.join(map(repr, extra))}"
    if err.validator == "type":
        return f"expected {' or '.join(err.validator_value) if isinstance(err.validator_value, list) else err.validator_value}, got {type(err.instance).__name__}"
    if err.validator == "enum":  # a nullable enum lists None too: null is not what the user missed
        return f"{err.instance!r} is not one of {[v for v in err.validator_value if v is not None]!r}"
    if err.validator == "required":
        return err.message.replace(" is a required property", ": required")
    return str(err.message)


# -- one custom resource -------------------------------------------------------------------------

@functools.cache
def validator_for(kind: str) -> SchemaValidator:
    """The validator of the generated CRD of `kind` (built once per process)."""
    from aiperf.crd.generator import build_crd

    return SchemaValidator(build_crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def validate_resource(doc: Any, old: Any = None) -> list[Problem]:
    """Everything wrong with one AIPerfJob or AIPerfSweep document (an update of `old` when
    given): its apiVersion, kind and name, the CRD's schema and CEL rules, and, when those pass,
    the typed model's own checks. Empty: the API server and the operator would accept it."""
    if not isinstance(doc, dict):
        return [Problem("", "expected a mapping (an AIPerfJob or AIPerfSweep)")]
    out: list[Problem] = []
    if doc.get("apiVersion") != f"{API_GROUP}/{API_VERSION}":
        out.append(Problem("apiVersion", f"expected {API_GROUP}/{API_VERSION}, got {doc.get('apiVersion')!r}"))
    kind = doc.get("kind")
    if kind not in KINDS:
        out.append(Problem("kind", f"expected {' or '.join(KINDS)}, got {kind!r}"))
        return out
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str):
        out.append(Problem("metadata.name", "required"))
    elif not is_dns1123_label(name) or len(jobset_name(name)) > 63:
        out.append(Problem("metadata.name", f"{name!r}: lowercase letters, digits and '-', starting and ending "
                                            f"with a letter or digit, at most {63 - len(jobset_name(''))} characters"))
    elif kind == SWEEP_KIND and (problem := sweep_name_problem(name)) is not None:
        out.append(Problem("metadata.name", problem.removeprefix(f"name {name!r}: ")))
    spec = doc.get("spec")
    if kind == JOB_KIND and isinstance(spec, dict) and "sweep" in spec:  # AIPerf's `kube init` of a sweep template
        out.append(Problem("spec.sweep", "an AIPerfJob is one run; a sweep is an AIPerfSweep (kind: AIPerfSweep)"))
        doc = {**doc, "spec": {k: v for k, v in spec.items() if k != "sweep"}}
    out += validator_for(kind).problems(doc, old)
    try:
        if not out:
            decode_spec(spec, kind)
        elif isinstance(spec, dict) and "benchmark" in spec:  # the envelope is wrong: still read the benchmark
            rendered = render_document(spec, os.environ)
            read_benchmark(rendered.get("benchmark"), rendered.get("randomSeed"), rendered.get("variables"))
    except ConfigError as exc:
        where, _, what = str(exc).partition(": ")
        out.append(Problem(where, what) if what else Problem("spec", where))
    return sorted(set(out))
