"""Waiting for the model (AIPerf 0.13.0's `--wait-for-model-*` readiness probe): before the run
configures anything, every endpoint URL is probed until it is ready or
`endpoint.wait_for_model_timeout` seconds pass (per URL and model, as in AIPerf).

- `inference`: POST a one-token request (`"Lo"`, `max_tokens` 1; embeddings: `input`) to the
  URL's request URL; any HTTP status below 500 is ready (a 4xx shows on the first benchmark
  request the same way).
- `models`: GET `<server root>/v1/models` until its `data[]` names the model; a 404 there falls
  back to a plain GET of the URL (any 2xx is ready).
- `both`: `models`, then `inference`.

Connection errors and 5xx are retried every `wait_for_model_interval` seconds. Where AIPerf
derives the probe's URL from the `--url` text (a `/v1` base is probed as `<url>/v1/models` and
posted to as is), this probes where the benchmark's requests go (`Endpoint.request_url`) and the
server's own `/v1/models`. Standard library HTTP, in a thread: nothing is imported unless asked.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import structlog

from aiperf.config import Endpoint

log = structlog.get_logger("aiperf.system_controller.readiness")

PROMPT = "Lo"
"""The probe's prompt (AIPerf's)."""
MIN_REQUEST_TIMEOUT_S = {"models": 5.0, "inference": 30.0}
"""Floors of one probe request's timeout (AIPerf's): max(interval, floor), capped by the time left."""


class NotReady(Exception):
    """A URL was not ready within the timeout (the message is one line)."""


@dataclass(frozen=True)
class Answer:
    """One probe request's outcome: the HTTP status (None: no connection) and the body."""

    status: int | None
    body: bytes = b""
    error: str = ""


Fetch = Callable[[str, bytes | None, Mapping[str, str], float], Answer]
"""(url, body or None for a GET, headers, timeout s) -> Answer. Blocking."""


def fetch(url: str, body: bytes | None, headers: Mapping[str, str], timeout: float) -> Answer:
    """One HTTP request with the standard library: POST `body` (JSON) or GET. `urllib.request`
    (with `http.client` and `email`: ~15 ms of CPU) is imported here, in the probing thread, not
    by the `aiperf` process on its way to the first request."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (the user's endpoint URL)
            return Answer(answer.status, answer.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read() if exc.fp is not None else b"")
    except (OSError, ValueError) as exc:  # refused, reset, timed out, bad URL
        return Answer(None, error=str(getattr(exc, "reason", exc)))


def probe_headers(env: Mapping[str, str]) -> dict[str, str]:
    """The headers the workers send (AIPERF_API_KEY as a bearer token, AIPERF_HEADERS_JSON), where
    this process has them; an unusable AIPERF_HEADERS_JSON is left to the workers to report."""
    headers: dict[str, str] = {}
    if key := env.get("AIPERF_API_KEY"):
        headers["Authorization"] = f"Bearer {key}"
    try:
        extra = json.loads(env.get("AIPERF_HEADERS_JSON") or "{}")
    except ValueError:
        extra = {}
    if isinstance(extra, dict):
        headers.update({k: v for k, v in extra.items() if isinstance(k, str) and isinstance(v, str)})
    return headers


def inference_probe(endpoint: Endpoint, model: str, index: int) -> tuple[str, bytes]:
    """The request URL and JSON body of the one-token probe of URL `index`."""
    from aiperf.endpoints import path_of  # the endpoint kinds' default paths (the worker's too)

    kind = str(endpoint.type)
    body: dict[str, Any] = {"input": PROMPT} if kind == "embeddings" else (
        {"prompt": PROMPT, "max_tokens": 1} if kind == "completions" else
        {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1})
    body["model"] = model
    return endpoint.request_url(path_of(kind), index), json.dumps(body).encode()


def models_url(endpoint: Endpoint, index: int) -> str:
    """`/v1/models` at the root of URL `index`."""
    parts = urlsplit(endpoint.urls[index])
    return urlunsplit((parts.scheme, parts.netloc, "/v1/models", "", ""))


def _lists_model(body: bytes, model: str) -> bool:
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return False
    return isinstance(data, list) and any(isinstance(e, dict) and e.get("id") == model for e in data)


def wait_until_ready(endpoint: Endpoint, models: list[str], *, headers: Mapping[str, str],
                     fetch: Fetch = fetch, clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> None:
    """Probe every URL (and model) in turn as the module says; returns when all are ready.
    Blocking. Raises `NotReady` when one is not ready within `wait_for_model_timeout`."""
    timeout_s, interval_s, mode = (endpoint.wait_for_model_timeout, endpoint.wait_for_model_interval,
                                   endpoint.wait_for_model_mode)
    if timeout_s <= 0:
        return
    log.info("readiness.waiting", mode=mode, timeout_s=timeout_s, interval_s=interval_s, urls=len(endpoint.urls))
    for index in range(len(endpoint.urls)):
        for model in models:
            if mode in ("models", "both"):
                _until(functools.partial(_models_ready, endpoint, index, model, headers, fetch, interval_s),
                       f"model {model!r} at {models_url(endpoint, index)}", timeout_s, interval_s, clock, sleep)
            if mode in ("inference", "both"):
                url, body = inference_probe(endpoint, model, index)
                _until(functools.partial(_inference_ready, url, body, headers, fetch, interval_s),
                       f"{url} with model {model!r}", timeout_s, interval_s, clock, sleep)


def _inference_ready(url: str, body: bytes, headers: Mapping[str, str], fetch: Fetch, interval_s: float,
                     left: float) -> bool:
    answer = fetch(url, body, {"Content-Type": "application/json", **headers},
                   min(max(interval_s, MIN_REQUEST_TIMEOUT_S["inference"]), left))
    ready = answer.status is not None and answer.status < 500
    log.info("readiness.probe", url=url, status=answer.status, error=answer.error, ready=ready)
    return ready


def _models_ready(endpoint: Endpoint, index: int, model: str, headers: Mapping[str, str], fetch: Fetch,
                  interval_s: float, left: float) -> bool:
    url = models_url(endpoint, index)
    request_timeout = min(max(interval_s, MIN_REQUEST_TIMEOUT_S["models"]), left)
    answer = fetch(url, None, headers, request_timeout)
    if answer.status == 200:
        ready = _lists_model(answer.body, model)
    elif answer.status == 404:
        fallback = fetch(endpoint.urls[index], None, headers, request_timeout)
        ready = fallback.status is not None and 200 <= fallback.status < 300
    else:
        ready = False
    log.info("readiness.probe", url=url, status=answer.status, error=answer.error, ready=ready)
    return ready


def _until(ready: Callable[[float], bool], what: str, timeout_s: float, interval_s: float,
           clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
    deadline, attempts = clock() + timeout_s, 0
    while True:
        left = deadline - clock()
        if left <= 0:
            raise NotReady(f"--wait-for-model-timeout: {what} not ready after {timeout_s:g}s "
                           f"({attempts} probe(s), one every {interval_s:g}s)")
        attempts += 1
        if ready(left):
            return
        if attempts == 1:  # the one line a user sees at the default log level
            log.warning("readiness.not_ready", waiting_for=what, timeout_s=timeout_s)
        sleep(min(interval_s, max(0.0, deadline - clock())))


async def wait_for_model(endpoint: Endpoint, models: list[str], env: Mapping[str, str] | None = None) -> None:
    """`wait_until_ready` in a worker thread (cancellable: the thread is abandoned)."""
    if endpoint.wait_for_model_timeout <= 0:
        return
    headers = probe_headers(os.environ if env is None else env)
    await anyio.to_thread.run_sync(lambda: wait_until_ready(endpoint, models, headers=headers),
                                   abandon_on_cancel=True)
