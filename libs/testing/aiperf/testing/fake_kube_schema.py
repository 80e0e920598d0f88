"""Custom resources against their CRD version's structural `openAPIV3Schema`, as kube-apiserver
treats them: prune unknown fields (unless `x-kubernetes-preserve-unknown-fields`), apply
`default`s, validate (type, required, enum, nullable, minimum/maximum, exclusive bounds,
multipleOf, minLength/maxLength, pattern, minItems/maxItems, min/maxProperties,
`x-kubernetes-int-or-string`, `x-kubernetes-list-type` set/map uniqueness, allOf/anyOf/oneOf/not),
then evaluate `x-kubernetes-validations` CEL rules with cel-python (`self`; `oldSelf` in
transition rules, only where the old object has a value at the same place).

Error texts follow the apiserver's (`spec.x in body must be of type integer: "string"`,
`Unsupported value: "z": supported values: "a", "b"`, `failed rule: RULE`). Not modelled:
`format` checks, CEL's Kubernetes extension libraries (core CEL only), cost limits, ratcheting
of unchanged invalid values, `optionalOldSelf`, and CEL rules run only when the structural
checks passed (the real server reports both kinds together).
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes

from aiperf.testing.fake_kube_api import FieldError, Obj

_ROOT_KEEP = ("apiVersion", "kind", "metadata")
_OLD_SELF = re.compile(r"\boldSelf\b")
_NUMBER_TYPES = (int, float)


def apply_schema(schema: Obj, obj: Obj, old: Obj | None) -> tuple[list[str], list[FieldError]]:
    """Prune, default and validate custom resource `obj` in place (`old`: the stored object on
    an update, for transition rules). Returns (paths of pruned unknown fields, field errors)."""
    pruned: list[str] = []
    _prune(schema, obj, "", pruned, root=True)
    _default(schema, obj)
    errors: list[FieldError] = []
    _validate(schema, obj, "", errors, root=True)
    if not errors:
        _run_rules(schema, obj, old, "", errors, root=True)
    return pruned, errors


def rule_compile_errors(schema: Any, path: str) -> list[FieldError]:
    """Every `x-kubernetes-validations` rule in `schema` that does not compile (checked when a
    CRD is written, like the apiserver does)."""
    errors: list[FieldError] = []
    if not isinstance(schema, dict):
        return errors
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        try:
            _program(rule.get("rule", ""))
        except Exception as exc:  # celpy raises its own parse error types
            errors.append(FieldError("Invalid", f"{path}.x-kubernetes-validations[{i}].rule",
                                     f"compilation failed: {exc}", rule.get("rule", "")))
    for key, sub in (schema.get("properties") or {}).items():
        errors.extend(rule_compile_errors(sub, f"{path}.properties[{key}]"))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            errors.extend(rule_compile_errors(schema[key], f"{path}.{key}"))
    return errors


# -- pruning and defaulting ----------------------------------------------------------------------

def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune(schema: Obj, value: Any, path: str, pruned: list[str], *, root: bool = False) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        for key in list(value):
            child = value[key]
            if (root or embedded) and key in _ROOT_KEEP:
                if key == "metadata" or key not in props:
                    continue
            sub = props.get(key) if key in props else additional if isinstance(additional, dict) else None
            if sub is None:
                if not preserve and additional is not True:
                    del value[key]
                    pruned.append(_join(path, key))
                continue
            if child is None and not sub.get("nullable"):
                del value[key]  # a null in a non-nullable field is dropped (then defaulted)
                continue
            _prune(sub, child, _join(path, key), pruned)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _prune(schema["items"], item, f"{path}[{i}]", pruned)


def _default(schema: Obj, value: Any) -> None:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default(sub, value[key])
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key in value:
                if key not in (schema.get("properties") or {}):
                    _default(additional, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)


# -- structural validation -----------------------------------------------------------------------

def type_name(value: Any) -> str:
    """The OpenAPI type name of a JSON value (what the apiserver prints for a wrong type)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_ok(schema: Obj, value: Any) -> bool:
    if value is None:
        return bool(schema.get("nullable"))
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    match schema.get("type"):
        case "object":
            return isinstance(value, dict)
        case "array":
            return isinstance(value, list)
        case "string":
            return isinstance(value, str)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool) or (
                isinstance(value, float) and value.is_integer())
        case "number":
            return isinstance(value, _NUMBER_TYPES) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
        case _:
            return True


def _validate(schema: Obj, value: Any, path: str, errors: list[FieldError], *, root: bool = False) -> None:
    shown = path or "<root>"
    if not _type_ok(schema, value):
        errors.append(FieldError("Invalid", shown, f"{shown} in body must be of type {schema.get('type')}: "
                                 f'"{type_name(value)}"', type_name(value)))
        return
    if value is None:
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_quote(v) for v in schema["enum"])
        errors.append(FieldError("NotSupported", shown, f"supported values: {supported}", value))
    if isinstance(value, bool):
        pass
    elif isinstance(value, _NUMBER_TYPES):
        _validate_number(schema, value, shown, errors)
    elif isinstance(value, str):
        _validate_string(schema, value, shown, errors)
    elif isinstance(value, list):
        _validate_list(schema, value, path, errors)
    elif isinstance(value, dict):
        _validate_object(schema, value, path, errors, root=root)
    for sub in schema.get("allOf") or []:
        _validate(sub, value, path, errors)
    if schema.get("anyOf") and not any(_passes(sub, value) for sub in schema["anyOf"]):
        errors.append(FieldError("Invalid", shown, "must validate at least one schema (anyOf)", value))
    if schema.get("oneOf") and sum(_passes(sub, value) for sub in schema["oneOf"]) != 1:
        errors.append(FieldError("Invalid", shown, "must validate one and only one schema (oneOf)", value))
    if isinstance(schema.get("not"), dict) and _passes(schema["not"], value):
        errors.append(FieldError("Invalid", shown, "must not validate the schema (not)", value))


def _passes(schema: Obj, value: Any) -> bool:
    errors: list[FieldError] = []
    _validate(schema, value, "x", errors)
    return not errors


def _validate_number(schema: Obj, value: float, path: str, errors: list[FieldError]) -> None:
    if "minimum" in schema:
        exclusive = schema.get("exclusiveMinimum") is True
        if value < schema["minimum"] or (exclusive and value == schema["minimum"]):
            errors.append(FieldError("Invalid", path, f"{path} in body should be greater than "
                                     f"{'' if exclusive else 'or equal to '}{_num(schema['minimum'])}", value))
    if "maximum" in schema:
        exclusive = schema.get("exclusiveMaximum") is True
        if value > schema["maximum"] or (exclusive and value == schema["maximum"]):
            errors.append(FieldError("Invalid", path, f"{path} in body should be less than "
                                     f"{'' if exclusive else 'or equal to '}{_num(schema['maximum'])}", value))
    if schema.get("multipleOf") and (value / schema["multipleOf"]) % 1:
        errors.append(FieldError("Invalid", path, f"{path} in body should be a multiple of "
                                 f"{_num(schema['multipleOf'])}", value))


def _validate_string(schema: Obj, value: str, path: str, errors: list[FieldError]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(FieldError("TooLong", path, f"may not be more than {schema['maxLength']} bytes", value))
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(FieldError("Invalid", path, f"{path} in body should be at least {schema['minLength']} "
                                 "chars long", value))
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(FieldError("Invalid", path, f"{path} in body should match '{schema['pattern']}'", value))


def _validate_list(schema: Obj, value: list[Any], path: str, errors: list[FieldError]) -> None:
    shown = path or "<root>"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(FieldError("TooMany", shown, f"must have at most {schema['maxItems']} items", len(value)))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(FieldError("Invalid", shown, f"{shown} in body should have at least {schema['minItems']} "
                                 "items", value))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: list[Any] = []
        for i, item in enumerate(value):
            ident = [item.get(k) for k in keys] if list_type == "map" and isinstance(item, dict) else item
            if ident in seen:
                shown_item = ({k: item.get(k) for k in keys} if list_type == "map" and isinstance(item, dict)
                              else item)
                errors.append(FieldError("Duplicate", f"{path}[{i}]", "", shown_item))
            seen.append(ident)
    if isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _validate(schema["items"], item, f"{path}[{i}]", errors)


def _validate_object(schema: Obj, value: Obj, path: str, errors: list[FieldError], *, root: bool) -> None:
    shown = path or "<root>"
    for key in schema.get("required") or []:
        if key not in value and not (root and key == "metadata"):
            errors.append(FieldError("Required", _join(path, key)))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(FieldError("TooMany", shown, f"must have at most {schema['maxProperties']} items",
                                 len(value)))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(FieldError("Invalid", shown, f"{shown} in body should have at least "
                                 f"{schema['minProperties']} properties", len(value)))
    props = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, child in value.items():
        if root and key == "metadata":
            continue
        sub = props.get(key) if key in props else additional if isinstance(additional, dict) else None
        if sub is not None:
            _validate(sub, child, _join(path, key), errors)


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


# -- CEL ------------------------------------------------------------------------------------------

_ENV = celpy.Environment()


@lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule))


def _run_rules(schema: Obj, value: Any, old: Any, path: str, errors: list[FieldError], *,
               root: bool = False) -> None:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule.get("rule", "")
        transition = _OLD_SELF.search(text) is not None
        if transition and old is None:
            continue  # a transition rule only applies where an old value exists
        error = _evaluate(rule, _cel_view(value, root), _cel_view(old, root) if transition else None)
        if error is not None:
            field_path = path + rule["fieldPath"] if rule.get("fieldPath") else (path or "<root>")
            reason = str(rule.get("reason") or "FieldValueInvalid").removeprefix("FieldValue")
            shown = schema.get("type") or type_name(value)
            errors.append(FieldError(reason, field_path, error, shown))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            if root and key == "metadata":
                continue
            sub = props.get(key) if key in props else additional if isinstance(additional, dict) else None
            if sub is not None:
                old_child = old.get(key) if isinstance(old, dict) else None
                _run_rules(sub, child, old_child, _join(path, key), errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        for i, item in enumerate(value):
            old_item = None
            if schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list) and isinstance(item, dict):
                old_item = next((o for o in old if isinstance(o, dict)
                                 and all(o.get(k) == item.get(k) for k in keys)), None)
            _run_rules(schema["items"], item, old_item, f"{path}[{i}]", errors)


def _cel_view(value: Any, root: bool) -> Any:
    """At the root, CEL sees only metadata.name and metadata.generateName."""
    if root and isinstance(value, dict):
        meta = value.get("metadata") or {}
        return {**value, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}
    return value


def _evaluate(rule: Obj, new: Any, old: Any) -> str | None:
    """None when the rule holds, else the message the apiserver reports."""
    text = rule.get("rule", "")
    activation = {"self": celpy.json_to_cel(new)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        result = _program(text).evaluate(activation)
    except Exception as exc:  # noqa: BLE001 - a runtime error is the rule's failure, as on the server
        return f"{_failed(rule)}: {_error_text(exc)}"
    if isinstance(result, Exception):
        return f"{_failed(rule)}: {_error_text(result)}"
    if result is True or (isinstance(result, celtypes.BoolType) and bool(result)):
        return None
    if rule.get("messageExpression"):
        try:
            message = _program(rule["messageExpression"]).evaluate(activation)
            if isinstance(message, str) and message.strip():
                return str(message)
        except Exception:  # noqa: BLE001, S110 - the server falls back to `message`
            pass
    return str(rule.get("message") or _failed(rule))


def _failed(rule: Obj) -> str:
    return f"failed rule: {rule.get('rule', '')}"


def _error_text(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    return str(args[0]) if args else str(exc)
