"""Parsing of the `aiperf profile` flag values that are small languages of their own."""

from __future__ import annotations

import json
from typing import Any


class FlagError(ValueError):
    """A flag value that cannot be used; the message is one line naming the flag."""


def parse_goodput(spec: str | None) -> dict[str, float]:
    """`"request_latency:250 inter_token_latency:10"` -> {tag: threshold} (display units)."""
    if not spec:
        return {}
    out: dict[str, float] = {}
    for item in spec.replace(",", " ").split():
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise FlagError(f"--goodput {item!r}: expected METRIC:VALUE, e.g. request_latency:250")
        try:
            out[key] = float(value)
        except ValueError as exc:
            raise FlagError(f"--goodput {item!r}: {value!r} is not a number") from exc
    return out


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def json_object(flag: str, item: str, *, hint: str = "") -> dict[str, Any]:
    """`item` (a flag value starting with `{`) as a JSON object; raises `FlagError`
    (`<flag> '<item>': invalid JSON (...)` or `... a JSON value must be an object`, then
    `; <hint>` when given)."""
    tail = f"; {hint}" if hint else ""
    try:
        obj = json.loads(item.strip())
    except json.JSONDecodeError as exc:
        raise FlagError(f"{flag} {item!r}: invalid JSON ({exc.msg}){tail}") from None
    if not isinstance(obj, dict):
        raise FlagError(f"{flag} {item!r}: a JSON value must be an object{tail}")
    return obj


def parse_extra_inputs(items: list[str]) -> dict[str, Any]:
    """Each item is `key:value` (value parsed as JSON when it is JSON) or a JSON object."""
    out: dict[str, Any] = {}
    for item in items:
        if item.strip().startswith("{"):
            out.update(json_object("--extra-inputs", item))
            continue
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise FlagError(f"--extra-inputs {item!r}: expected KEY:VALUE or a JSON object")
        out[key.strip()] = _value(value.strip())
    return out


def parse_headers(items: list[str]) -> dict[str, str]:
    """Each item is `Name:value` (or `Name: value`)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise FlagError(f"--header {item!r}: expected NAME:VALUE")
        out[name.strip()] = value.strip()
    return out


def normalize_url(url: str) -> str:
    """AIPerf adds `http://` when the scheme is missing; trailing slashes are dropped."""
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    return url.rstrip("/")
