"""Values of the `aiperf kube` flags that are small languages of their own.

Mapping flags (`--env-from-secrets`, `--env-vars`, `--labels`, `--annotations`, `--node-selector`)
take three equivalent spellings, freely mixed and repeated:

    --labels.team perf          (dotted key: rewritten by `expand_dotted_flags` before parsing)
    --labels team=perf          (KEY=VALUE)
    --labels '{"team": "perf"}' (a JSON object)

`--tolerations` takes a JSON object or list of objects, or `KEY[=VALUE][:EFFECT]`.
Durations (`--older-than`) are `90`, `30s`, `15m`, `2h`, `7d` or a sum such as `1h30m`.
Every problem is a `FlagError` whose message is one line naming the flag and the accepted forms.
Only the standard library is imported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from aiperf.cli.profile_args import FlagError, json_object

MAPPING_FLAGS = ("--env-from-secrets", "--env-vars", "--labels", "--annotations", "--node-selector")
"""Flags whose value is a string-to-string mapping."""

TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_FIELDS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})

__all__ = ["MAPPING_FLAGS", "FlagError", "expand_dotted_flags", "parse_list", "parse_mapping",
           "parse_duration", "parse_resources", "parse_tolerations"]


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhd])+")


def _forms(flag: str) -> str:
    return f"use {flag}.KEY VALUE, {flag} KEY=VALUE or {flag} '{{\"KEY\": \"VALUE\"}}'"


def expand_dotted_flags(argv: Sequence[str], flags: Iterable[str] = MAPPING_FLAGS) -> list[str]:
    """`argv` with every `--flag.KEY VALUE` (or `--flag.KEY=VALUE`) of a mapping flag rewritten
    to `--flag KEY=VALUE`; all other tokens, and everything after `--`, kept as they are.

    Raises FlagError when a dotted flag has an empty key or no value after it."""
    known = tuple(flags)
    out: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            out += tokens[i:]
            break
        flag, dot, rest = token.partition(".")
        if not dot or flag not in known:
            out.append(token)
            i += 1
            continue
        key, eq, value = rest.partition("=")
        if not key:
            raise FlagError(f"{token}: the key after '{flag}.' is empty; {_forms(flag)}")
        if not eq:
            if i + 1 >= len(tokens):
                raise FlagError(f"{token}: needs a value; {_forms(flag)}")
            value = tokens[i + 1]
            i += 1
        out += [flag, f"{key}={value}"]
        i += 1
    return out


def _scalar(flag: str, key: str, value: Any) -> str:
    """A JSON value as the string Kubernetes wants (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise FlagError(f"{flag} {key}: the value must be a string, number or boolean, not "
                    f"{type(value).__name__ if value is not None else 'null'}")


def parse_mapping(flag: str, items: Iterable[str] | None) -> dict[str, str]:
    """The mapping given by the repeated values `items` of `flag` (see the module doc).

    Each item is `KEY=VALUE` (the value may contain '=') or a JSON object of scalars; later items
    win on a repeated key. Raises FlagError naming the item and the accepted forms."""
    out: dict[str, str] = {}
    for item in items or []:
        if item.strip().startswith("{"):
            for key, value in json_object(flag, item, hint=_forms(flag)).items():
                if not key:
                    raise FlagError(f"{flag} {item!r}: a key is empty; {_forms(flag)}")
                out[key] = _scalar(flag, key, value)
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise FlagError(f"{flag} {item!r}: expected KEY=VALUE; {_forms(flag)}")
        out[key.strip()] = value
    return out


def parse_list(flag: str, items: Iterable[str] | None) -> list[str]:
    """Repeated values of `flag`, each possibly comma-separated (`a,b`) or a JSON list of
    strings; empty entries dropped, order kept, duplicates removed."""
    out: list[str] = []
    for item in items or []:
        text = item.strip()
        if text.startswith("["):
            try:
                values = json.loads(text)
            except json.JSONDecodeError as exc:
                raise FlagError(f"{flag} {item!r}: invalid JSON ({exc.msg})") from None
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise FlagError(f"{flag} {item!r}: a JSON value must be a list of strings")
        else:
            values = text.split(",")
        out += [v.strip() for v in values if v.strip() and v.strip() not in out]
    return out


def _toleration(flag: str, item: str, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise FlagError(f"{flag} {item!r}: each toleration must be a JSON object")
    unknown = sorted(set(obj) - TOLERATION_FIELDS)
    if unknown:
        raise FlagError(f"{flag} {item!r}: unknown field {unknown[0]!r} "
                        f"(fields: {', '.join(sorted(TOLERATION_FIELDS))})")
    if obj.get("operator", "Equal") not in ("Equal", "Exists"):
        raise FlagError(f"{flag} {item!r}: operator must be Equal or Exists")
    if obj.get("operator") == "Exists" and obj.get("value"):
        raise FlagError(f"{flag} {item!r}: operator Exists takes no value")
    if "effect" in obj and obj["effect"] not in TOLERATION_EFFECTS:
        raise FlagError(f"{flag} {item!r}: effect must be one of {', '.join(TOLERATION_EFFECTS)}")
    if "tolerationSeconds" in obj and (isinstance(obj["tolerationSeconds"], bool)
                                       or not isinstance(obj["tolerationSeconds"], int)):
        raise FlagError(f"{flag} {item!r}: tolerationSeconds must be an integer")
    if not obj.get("key") and obj.get("operator") != "Exists":
        raise FlagError(f"{flag} {item!r}: a toleration without a key needs operator Exists")
    return dict(obj)


def parse_tolerations(items: Iterable[str] | None, flag: str = "--tolerations") -> list[dict[str, Any]]:
    """Pod tolerations from repeated `--tolerations` values.

    Each value is a JSON object, a JSON list of objects, or `KEY=VALUE:EFFECT` (operator Equal),
    `KEY:EFFECT` or `KEY` (operator Exists), `KEY=VALUE` (any effect). Raises FlagError for a
    malformed value, an unknown field, operator or effect."""
    out: list[dict[str, Any]] = []
    for item in items or []:
        text = item.strip()
        if text.startswith(("{", "[")):
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise FlagError(f"{flag} {item!r}: invalid JSON ({exc.msg})") from None
            out += [_toleration(flag, item, o) for o in (obj if isinstance(obj, list) else [obj])]
            continue
        head, colon, effect = text.rpartition(":") if ":" in text else (text, "", "")
        key, eq, value = head.partition("=")
        if not key or (eq and not value) or (colon and not effect):
            raise FlagError(f"{flag} {item!r}: expected KEY=VALUE:EFFECT, KEY:EFFECT, KEY or a JSON object, "
                            "e.g. nvidia.com/gpu=present:NoSchedule")
        toleration: dict[str, Any] = {"key": key, "operator": "Equal" if eq else "Exists"}
        if eq:
            toleration["value"] = value
        if colon:
            toleration["effect"] = effect
        out.append(_toleration(flag, item, toleration))
    return out


def parse_resources(text: str | None, flag: str = "--resources") -> dict[str, dict[str, dict[str, str]]]:
    """`{"SERVICE_TYPE": {"requests": {...}, "limits": {...}}}` from a JSON object (None: {}).
    Quantities may be JSON numbers (`"cpu": 1`) and become strings. Service types are checked
    when the deployment is built."""
    if not text:
        return {}
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        example = json.dumps({"worker": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}})
        raise FlagError(f"{flag}: invalid JSON ({exc.msg}); expected e.g. '{example}'") from None
    if not isinstance(obj, dict):
        raise FlagError(f"{flag}: expected a JSON object of service type -> {{requests, limits}}")
    out: dict[str, dict[str, dict[str, str]]] = {}
    for service, spec in obj.items():
        if not isinstance(spec, dict) or set(spec) - {"requests", "limits"}:
            raise FlagError(f"{flag} {service}: expected an object with requests and/or limits")
        out[service] = {}
        for part, quantities in spec.items():
            if not isinstance(quantities, dict):
                raise FlagError(f"{flag} {service}.{part}: expected an object such as {{\"cpu\": \"500m\"}}")
            out[service][part] = {k: _scalar(f"{flag} {service}.{part}", k, v) for k, v in quantities.items()}
    return out


def parse_duration(flag: str, text: str) -> float:
    """Seconds in `text`: a plain number of seconds, or numbers with units s, m, h, d, summed
    (`1h30m`). Raises FlagError naming `flag` and the accepted forms."""
    value = text.strip()
    if _NUMBER.fullmatch(value):
        return float(value)
    if _DURATION.fullmatch(value) is None:
        raise FlagError(f"{flag} {text!r}: expected a duration such as 90, 30s, 15m, 2h, 7d or 1h30m")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(value))
