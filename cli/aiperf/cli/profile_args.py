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


SERVER_METRICS_FORMATS = ("json", "csv")
"""The server-metrics exports we write (AIPerf also offers jsonl and parquet)."""


def parse_server_metrics_formats(items: list[str]) -> list[str]:
    """`--server-metrics-formats json csv` (or `json,csv`): the formats, each once, in order."""
    out: list[str] = []
    for value in (v.strip().lower() for item in items for v in item.split(",") if v.strip()):
        if value in ("jsonl", "parquet"):
            raise FlagError(f"--server-metrics-formats {value}: not supported (only the json and csv "
                            "server-metrics exports are built)")
        if value not in SERVER_METRICS_FORMATS:
            raise FlagError(f"--server-metrics-formats {value}: unknown format (json, csv)")
        if value not in out:
            out.append(value)
    if not out:
        raise FlagError("--server-metrics-formats: give at least one format (json, csv)")
    return out


_GPU_UNBUILT = {
    "pynvml": "local GPU collectors (pynvml, amdsmi) are not built; DCGM exporter endpoints are",
    "amdsmi": "local GPU collectors (pynvml, amdsmi) are not built; DCGM exporter endpoints are",
    "dashboard": "the realtime GPU telemetry dashboard is not built",
}


def parse_gpu_telemetry(items: list[str]) -> list[str]:
    """`--gpu-telemetry URL...`: DCGM exporter endpoints (`http://` added when missing). AIPerf's
    other values (a local collector, the realtime dashboard, a metrics CSV file) are refused."""
    urls: list[str] = []
    for value in (v.strip() for item in items for v in item.split(",") if v.strip()):
        if value.lower() in _GPU_UNBUILT:
            raise FlagError(f"--gpu-telemetry {value}: not supported ({_GPU_UNBUILT[value.lower()]})")
        if value.lower().endswith(".csv"):
            raise FlagError(f"--gpu-telemetry {value}: not supported (custom GPU metrics files are not built)")
        urls.append(normalize_url(value))
    return urls
