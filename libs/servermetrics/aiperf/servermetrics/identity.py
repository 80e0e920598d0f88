"""What the inference server says it is: asked once per run, exported with the results.

`probe_identity(url)` GETs, at the server's root, llama.cpp's `/props`, vLLM's (and SGLang's)
`/version` and the OpenAI `/v1/models`, and keeps the `Server` header of the answers. Each is
optional: a server that answers none still gets `{"server": None, ...}`. Per-response identity
(OpenAI's `system_fingerprint`) is in each response body, kept in `profile_export_raw.jsonl`
(`--export-level raw`).

Blocking (stdlib `http.client`, a few seconds at most): call it in a worker thread. Never raises
for what the server does; the result says what answered.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any
from urllib.parse import urlsplit

PROBES = ("/props", "/version", "/v1/models")
PROPS_KEYS = ("build_info", "model_path", "total_slots", "n_ctx", "modalities", "chat_template_caps")
"""The fields of llama.cpp's /props worth keeping (its chat template and defaults are long)."""


def server_root(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of the server behind an endpoint URL; no scheme means http."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = parts.scheme.lower() or "http"
    return scheme, parts.hostname or "localhost", parts.port or (443 if scheme == "https" else 80)


def _get(root: tuple[str, str, int], path: str, headers: dict[str, str],
         timeout_s: float) -> tuple[int, str | None, Any]:
    scheme, host, port = root
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        body = answer.read(1 << 20)
        try:
            data = json.loads(body) if answer.status == 200 else None
        except ValueError:
            data = None
        return answer.status, answer.getheader("Server"), data
    finally:
        conn.close()


def probe_identity(url: str, *, headers: dict[str, str] | None = None, timeout_s: float = 2.0) -> dict[str, Any]:
    """The server's identity (see the module doc):

    ``{"server": Server header or None, "version": str or None, "models": [ids],
    "llamacpp": {selected /props fields} or None, "probes": {path: status or error}}``.
    `headers` (e.g. the API key) go with every probe."""
    root = server_root(url)
    out: dict[str, Any] = {"server": None, "version": None, "models": [], "llamacpp": None, "probes": {}}
    for path in PROBES:
        try:
            status, server, data = _get(root, path, headers or {}, timeout_s)
        except (OSError, http.client.HTTPException) as exc:
            out["probes"][path] = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ConnectionRefusedError):
                break  # nothing listens: the other probes would say the same
            continue
        out["probes"][path] = status
        out["server"] = out["server"] or server
        if not isinstance(data, dict):
            continue
        if path == "/props":
            out["llamacpp"] = {k: data[k] for k in PROPS_KEYS if k in data}
            build = data.get("build_info")
            out["version"] = out["version"] or (str(build) if build else None)
        elif path == "/version" and data.get("version"):
            out["version"] = str(data["version"])
        elif path == "/v1/models":
            out["models"] = [m["id"] for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
    return out
