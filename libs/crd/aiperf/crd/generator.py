"""The CRDs of `AIPerfJob` and `AIPerfSweep`, generated from the models (never edited by hand).

Pipeline: the models' JSON Schema (msgspec: `$defs` + `$ref`, tagged unions as `anyOf` with a
discriminator, `additionalProperties: false`) -> a structural OpenAPI v3 schema:

- `$ref`s inlined; an `anyOf` with `null` collapsed to `nullable: true`; `integer | number` to
  `number`; an enum without a type gets its type.
- A tagged union becomes one object with every variant's properties and the tag as an enum;
  what differs per variant becomes CEL: a property only some variants have, one only some
  require, one only some allow to be null, and the variants' own rules (guarded by the tag).
  Variants that declare one property differently are refused.
- `additionalProperties: false` dropped (structural schemas forbid it beside `properties`;
  pruning does that job); a free-form map (`spec.benchmark`, `podTemplate.affinity`) is
  `type: object` with `x-kubernetes-preserve-unknown-fields: true`; `propertyNames` (enum-keyed
  maps) become CEL on the map; numeric `exclusiveMinimum` becomes OpenAPI's boolean form.
- `default`s kept only where they are valid for their node (never `null`, never under status).
- Cross-field rules as `x-kubernetes-validations` on the object they concern: the envelope
  models' (`cel_rules` beside their `__post_init__`); on `spec`, immutability of every field but
  the kind's mutable set, in the presence-safe form.

`spec.benchmark` is AIPerf's config v2 body as users write it (camelCase or snake_case,
shorthands, Jinja2 `variables`), so the CRD keeps it as written; the operator reads it with the
benchmark model (`aiperf.crd.model.decode_spec`) and a CR it cannot run ends Failed with
`ConfigValid=False` and one line naming the field (`aiperf kube validate` says the same offline).

`build_crds()` returns both CRDs, `render_crds()` their YAML files; `main` writes them or, with
`--check`, exits 1 when the committed files are stale. Raises `GeneratorError` for a schema it
cannot express structurally (loudly, never a silent approximation).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import yaml

from aiperf.crd.model import (
    API_GROUP,
    API_VERSION,
    JOB_KIND,
    SWEEP_KIND,
    AIPerfJobStatus,
    AIPerfSweepStatus,
    CelRule,
    EnvVar,
    JobSpecSchema,
    MultiRun,
    PodTemplate,
    SweepSpec,
    SweepSpecSchema,
    Toleration,
)

__all__ = [
    "CRD_DIR", "ENVELOPE_MODELS", "GeneratorError", "build_crd", "build_crds", "immutability_rule",
    "main", "render_crds", "repo_root", "stale_files", "to_structural",
]

CRD_DIR = Path("deploy/helm/aiperf-operator/crds")
"""Where the CRD files live, relative to the repository root."""

HEADER = ("# Generated from aiperf.crd.model by aiperf.crd.generator: do not edit.\n"
          "# Regenerate with `./pants run operator:crds`; `./pants run operator:crds -- --check` checks it.\n")

ENVELOPE_MODELS = (EnvVar, Toleration, PodTemplate, SweepSpec, MultiRun, JobSpecSchema)
"""Envelope models with cross-field rules (`cel_rules`)."""


class GeneratorError(Exception):
    """The schema has a construct the generator cannot express structurally."""


def immutability_rule(field: str, mutable: Iterable[str]) -> CelRule:
    """The transition rule that keeps spec field `field` as it was at creation: presence-safe (a
    field-scoped rule would not run when the field is added or removed, so it sits on `spec`)."""
    allowed = " and ".join(sorted(mutable))
    return CelRule(f"has(oldSelf.{field}) == has(self.{field}) && "
                   f"(!has(self.{field}) || oldSelf.{field} == self.{field})",
                   f"{field}: immutable after creation (only {allowed} may change)", f".{field}")


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values).replace('"', "'") + "]"


def _guard(disc: str, tags: Sequence[str]) -> str:
    if len(tags) == 1:
        return f"self.{disc} == '{tags[0]}'"
    return f"self.{disc} in {_cel_list(tags)}"


_KEY_ORDER = ("type", "description", "nullable", "format", "enum", "pattern", "minLength", "maxLength",
              "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minItems", "maxItems",
              "minProperties", "maxProperties", "properties", "additionalProperties", "items", "required",
              "default", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type",
              "x-kubernetes-list-map-keys", "x-kubernetes-validations")
_CONSTRAINTS = ("format", "pattern", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems",
                "minProperties", "maxProperties")
_IGNORED = frozenset({"title", "$ref", "anyOf", "discriminator", "additionalProperties", "propertyNames",
                      "exclusiveMinimum", "exclusiveMaximum", "required", "properties", "items", "default",
                      "description", "type", "enum", "nullable", *_CONSTRAINTS})


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    unknown = set(node) - set(_KEY_ORDER)
    if unknown:
        raise GeneratorError(f"internal: unexpected schema keys {sorted(unknown)}")
    return {k: node[k] for k in _KEY_ORDER if k in node}


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Converter:
    """JSON Schema (msgspec's) -> structural OpenAPI v3, one document at a time."""

    def __init__(self, schema: dict[str, Any], rules: dict[str, tuple[CelRule, ...]]) -> None:
        self._defs: dict[str, Any] = schema.get("$defs", {})
        self._rules = rules

    def _resolve(self, node: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """`node` with its `$ref` inlined (the referencing node's own keys win) and the def name."""
        if "$ref" not in node:
            return node, None
        name = node["$ref"].rpartition("/")[2]
        if name not in self._defs:
            raise GeneratorError(f"unresolved $ref {node['$ref']}")
        merged = {**self._defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        inner, inner_name = self._resolve(merged)
        return inner, inner_name or name

    def convert(self, node: dict[str, Any], where: str) -> dict[str, Any]:
        node, def_name = self._resolve(node)
        if "anyOf" in node:
            return self._any_of(node, where)
        unknown = set(node) - _IGNORED
        if unknown:
            raise GeneratorError(f"{where}: unsupported JSON Schema keyword(s) {sorted(unknown)}")
        kind = node.get("type")
        if kind is None and "enum" in node:
            kind = self._enum_type(node["enum"], where)
        if not isinstance(kind, str):
            raise GeneratorError(f"{where}: no single type ({kind!r}); structural schemas need one")
        out: dict[str, Any] = {"type": kind}
        if node.get("description"):
            out["description"] = node["description"]
        if "enum" in node:
            out["enum"] = list(node["enum"])
        for key in _CONSTRAINTS:
            if key in node:
                out[key] = node[key]
        for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if bound in node:  # JSON Schema's numeric form -> OpenAPI v3.0's boolean form
                out[flag], out[bound] = node[bound], True
        rules = list(self._rules.get(def_name or "", ()))
        if kind == "object":
            rules += self._object(node, out, where)
        elif kind == "array":
            if "items" not in node:
                raise GeneratorError(f"{where}: an array needs items")
            out["items"] = self.convert(node["items"], f"{where}[]")
        if "default" in node:
            out["default"] = copy.deepcopy(node["default"])
        if rules:
            out["x-kubernetes-validations"] = [r.to_schema() for r in rules]
        return _ordered(out)

    @staticmethod
    def _enum_type(values: list[Any], where: str) -> str:
        if all(isinstance(v, str) for v in values):
            return "string"
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return "integer"
        raise GeneratorError(f"{where}: an enum of mixed types")

    def _object(self, node: dict[str, Any], out: dict[str, Any], where: str) -> list[CelRule]:
        rules: list[CelRule] = []
        if "properties" in node:
            out["properties"] = {k: self.convert(v, f"{where}.{k}") for k, v in node["properties"].items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(node.get("additionalProperties"), dict) and node["additionalProperties"]:
            out["additionalProperties"] = self.convert(node["additionalProperties"], f"{where}.*")
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
        if "propertyNames" in node:
            rules += self._key_rules(self._resolve(node["propertyNames"])[0], where)
        return rules

    def _key_rules(self, names: dict[str, Any], where: str) -> list[CelRule]:
        rules = []
        if "enum" in names:
            rules.append(CelRule(f"self.all(k, k in {_cel_list(names['enum'])})",
                                 f"keys must be one of: {', '.join(names['enum'])}"))
        if "pattern" in names:
            pattern = names["pattern"].replace("\\", "\\\\").replace("'", "\\'")
            rules.append(CelRule(f"self.all(k, k.matches('{pattern}'))", f"keys must match {names['pattern']}"))
        if "minLength" in names:
            rules.append(CelRule(f"self.all(k, size(k) >= {names['minLength']})",
                                 f"keys must have at least {names['minLength']} characters"))
        if "maxLength" in names:
            rules.append(CelRule(f"self.all(k, size(k) <= {names['maxLength']})",
                                 f"keys must have at most {names['maxLength']} characters"))
        unknown = set(names) - {"enum", "pattern", "minLength", "maxLength", "title", "description", "type"}
        if unknown:
            raise GeneratorError(f"{where}: unsupported propertyNames keyword(s) {sorted(unknown)}")
        return rules

    def _any_of(self, node: dict[str, Any], where: str) -> dict[str, Any]:
        members = node["anyOf"]
        nullable = any(m == {"type": "null"} for m in members)
        rest = [m for m in members if m != {"type": "null"}]
        outer = {k: v for k, v in node.items() if k not in ("anyOf", "discriminator")}
        if len(rest) == 1:
            out = self.convert({**rest[0], **outer}, where)
        elif "discriminator" in node:
            out = self._union(rest, node["discriminator"]["propertyName"], outer, where)
        elif sorted(m.get("type") for m in rest) == ["integer", "number"] and all(len(m) == 1 for m in rest):
            out = self.convert({**outer, "type": "number"}, where)
        else:
            raise GeneratorError(f"{where}: an untagged union {rest!r} has no structural form")
        if nullable:
            out = _ordered({**out, "nullable": True})
        return out

    def _union(self, members: list[dict[str, Any]], disc: str, outer: dict[str, Any], where: str) -> dict[str, Any]:
        variants: list[tuple[str, str, dict[str, Any]]] = []  # (tag, def name, resolved schema)
        for member in members:
            schema, name = self._resolve(member)
            tag_schema = schema.get("properties", {}).get(disc, {})
            if schema.get("type") != "object" or len(tag_schema.get("enum", ())) != 1:
                raise GeneratorError(f"{where}: union member {name} has no single {disc!r} tag")
            variants.append((tag_schema["enum"][0], name or "", schema))
        tags = [tag for tag, _, _ in variants]
        converted = {tag: {p: self.convert(s, f"{where}({tag}).{p}")
                           for p, s in schema["properties"].items() if p != disc}
                     for tag, _, schema in variants}
        required = {tag: set(schema.get("required", ())) - {disc} for tag, _, schema in variants}
        order: list[str] = []
        for tag in tags:
            order += [p for p in converted[tag] if p not in order]

        properties: dict[str, Any] = {disc: {"type": "string", "description": f"The variant: one of {', '.join(tags)}.",
                                             "enum": tags}}
        rules: list[CelRule] = []
        for prop in order:
            having = [tag for tag in tags if prop in converted[tag]]
            shapes = {json.dumps(_shape(converted[tag][prop]), sort_keys=True) for tag in having}
            if len(shapes) > 1:
                raise GeneratorError(f"{where}.{prop}: the variants {', '.join(having)} declare it differently")
            merged = copy.deepcopy(converted[having[0]][prop])
            merged.pop("default", None)
            merged.pop("nullable", None)
            defaults = [json.dumps(converted[t][prop].get("default"), sort_keys=True) for t in having]
            if len(having) == len(tags) and len(set(defaults)) == 1 and "default" in converted[having[0]][prop]:
                merged["default"] = converted[having[0]][prop]["default"]
            non_null = [t for t in having if not converted[t][prop].get("nullable")]
            if len(non_null) < len(having):
                merged["nullable"] = True
                if non_null:
                    rules.append(CelRule(f"!({_guard(disc, non_null)}) || !has(self.{prop}) "
                                         f"|| type(self.{prop}) != null_type",
                                         f"{prop}: must not be null for {disc} {', '.join(non_null)}", f".{prop}"))
            properties[prop] = _ordered(merged)
            if len(having) < len(tags):
                rules.append(CelRule(f"{_guard(disc, having)} || !has(self.{prop})",
                                     f"{prop}: only for {disc} {', '.join(having)}", f".{prop}"))
            needing = [t for t in tags if prop in required[t]]
            if needing and len(needing) < len(tags):
                rules.append(CelRule(f"!({_guard(disc, needing)}) || has(self.{prop})",
                                     f"{prop}: required for {disc} {', '.join(needing)}", f".{prop}"))
        for rule, owners in _rule_owners(variants, self._rules).items():
            if len(owners) == len(tags):
                rules.append(rule)
            else:
                rules.append(CelRule(f"!({_guard(disc, owners)}) || ({rule.rule})", rule.message, rule.field_path))
        descriptions = " ".join(f"`{disc}: {tag}`: {_one_line(schema.get('description', ''))}"
                                for tag, _, schema in variants)
        out: dict[str, Any] = {"type": "object", "description": f"One of {len(tags)} variants. {descriptions}",
                               "properties": properties,
                               "required": [disc, *(p for p in order if all(p in required[t] for t in tags))]}
        if "default" in outer:
            out["default"] = outer["default"]
        out["x-kubernetes-validations"] = [r.to_schema() for r in rules]
        return _ordered(out)


def _shape(node: dict[str, Any]) -> dict[str, Any]:
    """A converted node without what may differ between union variants."""
    return {k: v for k, v in node.items() if k not in ("default", "description", "nullable")}


def _rule_owners(variants: list[tuple[str, str, dict[str, Any]]],
                 rules: dict[str, tuple[CelRule, ...]]) -> dict[CelRule, list[str]]:
    owners: dict[CelRule, list[str]] = {}
    for tag, name, _ in variants:
        for rule in rules.get(name, ()):
            owners.setdefault(rule, []).append(tag)
    return owners


def _all_rules() -> dict[str, tuple[CelRule, ...]]:
    return {model.__name__: model.cel_rules for model in ENVELOPE_MODELS}


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _fix_defaults(node: dict[str, Any], *, keep: bool) -> None:
    """Drop defaults that are null, under status (`keep` False), or invalid for their node; strip
    nulls inside object defaults (absent and null mean the same to the models)."""
    for child in [*node.get("properties", {}).values(), node.get("items"), node.get("additionalProperties")]:
        if isinstance(child, dict):
            _fix_defaults(child, keep=keep)
    if "default" not in node:
        return
    value = _strip_nulls(node["default"])
    if not keep or value is None or not _default_is_valid(node, value):
        del node["default"]
    else:
        node["default"] = value


def _default_is_valid(node: dict[str, Any], value: Any) -> bool:
    import jsonschema

    from aiperf.crd.validation import to_jsonschema

    without = {k: v for k, v in node.items() if k != "default"}
    return not list(jsonschema.Draft4Validator(to_jsonschema(without)).iter_errors(value))


def to_structural(schema: dict[str, Any], *, defaults: bool = True,
                  rules: dict[str, tuple[CelRule, ...]] | None = None) -> dict[str, Any]:
    """The structural OpenAPI v3 form of a JSON Schema from `msgspec.json.schema` (see the module
    doc); `defaults` False drops every default. Raises `GeneratorError`."""
    converted = _Converter(schema, _all_rules() if rules is None else rules).convert(
        {k: v for k, v in schema.items() if k != "$defs"}, "$")
    _fix_defaults(converted, keep=defaults)
    return converted


_PRINTER_COLUMNS = {
    JOB_KIND: [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Progress", "type": "number", "jsonPath": ".status.progressPercent",
         "description": "Percent of the profiling phase's requests done"},
        {"name": "Requests", "type": "integer", "jsonPath": ".status.requestsCompleted",
         "description": "Requests completed in the latest profiling-kind phase"},
        {"name": "Total", "type": "integer", "jsonPath": ".status.requestsTotal", "priority": 1},
        {"name": "RPS", "type": "number", "jsonPath": ".status.requestsPerSecond", "priority": 1},
        {"name": "SubPhase", "type": "string", "jsonPath": ".status.subPhase", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    SWEEP_KIND: [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Progress", "type": "number", "jsonPath": ".status.progressPercent",
         "description": "Percent of the sweep's runs done"},
        {"name": "Runs", "type": "integer", "jsonPath": ".status.completedRuns"},
        {"name": "Total", "type": "integer", "jsonPath": ".status.totalRuns"},
        {"name": "Current", "type": "string", "jsonPath": ".status.currentChild", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
}

_MODELS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct], str, str]] = {
    JOB_KIND: (JobSpecSchema, AIPerfJobStatus, "aiperfjobs", "aiperfjob"),
    SWEEP_KIND: (SweepSpecSchema, AIPerfSweepStatus, "aiperfsweeps", "aiperfsweep"),
}
_SHORT_NAMES = {JOB_KIND: ["apjob"], SWEEP_KIND: ["apsweep"]}
_DESCRIPTIONS = {
    JOB_KIND: "One AIPerf benchmark run on Kubernetes, reconciled by the aiperf operator.",
    SWEEP_KIND: "A sweep of AIPerf benchmarks: one child AIPerfJob per variation (and trial).",
}


def plural(kind: str) -> str:
    """The resource name of `kind` (`aiperfjobs`)."""
    return _MODELS[kind][2]


def build_crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition of `kind` (`AIPerfJob` or `AIPerfSweep`)."""
    spec_model, status_model, plural_name, singular = _MODELS[kind]
    spec = to_structural(msgspec.json.schema(spec_model))
    mutable = spec_model.MUTABLE  # type: ignore[attr-defined]
    unknown = set(mutable) - set(spec["properties"])
    if unknown:
        raise GeneratorError(f"{kind}: mutable field(s) {sorted(unknown)} are not in the spec")
    spec["x-kubernetes-validations"] = [
        *spec.get("x-kubernetes-validations", ()),
        *(immutability_rule(f, mutable).to_schema() for f in spec["properties"] if f not in mutable)]
    status = to_structural(msgspec.json.schema(status_model), defaults=False)
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    status["properties"]["conditions"] = _ordered(conditions)
    root = {
        "type": "object",
        "description": _DESCRIPTIONS[kind],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural_name}.{API_GROUP}",
                     "labels": {"app.kubernetes.io/name": "aiperf-operator", "app.kubernetes.io/part-of": "aiperf"}},
        "spec": {
            "group": API_GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural_name, "singular": singular,
                      "shortNames": _SHORT_NAMES[kind], "categories": ["aiperf"]},
            "scope": "Namespaced",
            "versions": [{
                "name": API_VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": root},
                "subresources": {"status": {}},
                "additionalPrinterColumns": _PRINTER_COLUMNS[kind],
            }],
        },
    }


def build_crds() -> list[dict[str, Any]]:
    """Both CRDs: AIPerfJob, then AIPerfSweep."""
    return [build_crd(JOB_KIND), build_crd(SWEEP_KIND)]


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def render_crds() -> dict[str, str]:
    """File name -> YAML text of every CRD (what `CRD_DIR` must hold)."""
    return {f"{crd['spec']['names']['plural']}.yaml":
            HEADER + yaml.dump(crd, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)
            for crd in build_crds()}


def stale_files(directory: Path) -> list[str]:
    """Names of the CRD files in `directory` that differ from the generator's output (missing
    ones included; extra `*.yaml` files too, since nothing else belongs there)."""
    wanted = render_crds()
    stale = [name for name, text in wanted.items()
             if not (directory / name).is_file() or (directory / name).read_text() != text]
    stale += sorted(p.name for p in directory.glob("*.yaml") if p.name not in wanted) if directory.is_dir() else []
    return stale


def repo_root(start: Path) -> Path:
    """The first of `start` and its parents that holds `pants.toml` (`start` itself if none
    does): `./pants run` may start the generator in the build root or in a sandbox below it."""
    for candidate in (start, *start.parents):
        if (candidate / "pants.toml").is_file():
            return candidate
    return start


def main(argv: Sequence[str] | None = None) -> int:
    """`crds [--check] [--dir DIR]`: write the CRD files (default `CRD_DIR` under the repository
    root found from the current directory) and return 0; with `--check` write nothing, and return
    1 after one line on stderr naming the stale files (0 when they are current)."""
    parser = argparse.ArgumentParser(prog="crds", description="Generate the AIPerfJob and AIPerfSweep CRDs.")
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed CRDs are stale")
    parser.add_argument("--dir", type=Path, default=None, help=f"where the CRD files live (default {CRD_DIR})")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    directory: Path = args.dir if args.dir is not None else repo_root(Path.cwd()) / CRD_DIR
    shown = args.dir if args.dir is not None else CRD_DIR
    if args.check:
        stale = stale_files(directory)
        if stale:
            print(f"stale CRD file(s): {', '.join(str(shown / name) for name in stale)}; "
                  "run `./pants run operator:crds` and commit the result", file=sys.stderr)
            return 1
        print(f"{shown}: CRDs up to date")
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in render_crds().items():
        (directory / name).write_text(text)
    for extra in stale_files(directory):
        (directory / extra).unlink()
    print(f"wrote {', '.join(sorted(render_crds()))} to {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
