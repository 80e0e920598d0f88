"""The mock OpenAI-compatible server as one raw ASGI callable (no framework on the hot path).

Routes (the POST ones are the endpoint kinds of `aiperf.endpoints.catalog`, each answered in its
kind's `Answer` shape, its prompt read from the kind's prompt field)::

    POST /v1/chat/completions   chat completions, streaming (SSE) and non-streaming
    POST /v1/completions        text completions, streaming (SSE) and non-streaming
    POST /v1/embeddings         deterministic unit vectors, ``embedding_dim`` floats per input
    GET  /v1/models             the configured model (requests may name any model; it is echoed)
    GET  /health                {"status": "ok"}
    GET  /metrics               Prometheus text (see :meth:`StatsBoard.prometheus`)
    GET  /stats                 JSON counters (see :meth:`StatsBoard.snapshot`)

Timing contract: ``t0`` is taken when the request reaches the app. Token ``k`` (0-based) of a stream
is sent at the absolute deadline ``t0 + d0 + d1 + ... + dk`` where ``d0`` is the TTFT and every later
``d`` the ITL, each with uniform ``+-jitter`` (clamped at 0). Deadlines never depend on when the
previous send actually happened, so lateness does not accumulate. A non-streaming response is sent
at the deadline of its last token (``TTFT + (n-1) * ITL``). ``headers_delay_ms`` holds the response
headers of inference requests (their first byte) until ``t0 + headers_delay``; no token is sent
before them. ``close_connections`` adds ``Connection: close`` to every response.

Usage in streams: the final chunk (empty delta / empty text, with ``finish_reason``) ALWAYS carries
``usage`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens``), whether or not the request set
``stream_options.include_usage``; then ``data: [DONE]``. Every SSE event is its own ASGI body message.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import orjson

from aiperf.endpoints.catalog import CATALOG, Answer
from aiperf.mock_server.config import MockConfig
from aiperf.mock_server.faults import Fault, serve_fault
from aiperf.mock_server.stats import ENDPOINTS, VLLM, Counter, StatsBoard, request_slot
from aiperf.mock_server.tokens import (
    VOCAB_JSON,
    Embedder,
    count_chat,
    count_prompt,
    embedding_inputs,
    generated_text,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_PROM_HEADERS = [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]
_DONE = b"data: [DONE]\n\n"

_KINDS = len(CATALOG)
"""Routes 0 .. _KINDS - 1 are the endpoint kinds, in catalog order."""
_MODELS, _HEALTH, _METRICS, _STATS, _OTHER = range(_KINDS, len(ENDPOINTS))
_ROUTES: dict[str, tuple[bytes, int]] = {
    path: (b"POST" if i < _KINDS else b"GET", i) for i, path in enumerate(ENDPOINTS[:_OTHER])
}


class Clock(Protocol):
    """Time source of the app; tests may pass a fake."""

    def now(self) -> float:
        """Seconds on a monotonic, high-resolution clock."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return at or after ``deadline`` (a :meth:`now` value); return at once if it is past."""
        ...


class PerfClock:
    """``time.perf_counter`` with ``asyncio.sleep``; never returns before the deadline.

    Event loops round timer delays to whole milliseconds (libuv rounds to nearest, so a wake can be
    up to ~1 ms early); on an early wake the remainder is slept again, which for sub-millisecond
    remainders means a few loop turns rather than another millisecond of oversleep.
    """

    now = staticmethod(time.perf_counter)

    async def sleep_until(self, deadline: float) -> None:
        """See :meth:`Clock.sleep_until`."""
        delay = deadline - time.perf_counter()
        while delay > 0:
            await asyncio.sleep(delay)
            delay = deadline - time.perf_counter()


class BadRequest(Exception):
    """The request body is malformed; answered with HTTP 400 and this message."""


class MockApp:
    """ASGI 3 application answering OpenAI-style requests with synthetic tokens on a schedule.

    ``stats`` receives every count; ``rng`` decides injected errors and jitter (seed it for a
    reproducible sequence). The app never raises to the server for a client's mistake or for a
    client disconnect; those become 4xx answers or a counted disconnect.
    """

    def __init__(self, *, config: MockConfig, stats: StatsBoard, rng: random.Random,
                 clock: Clock | None = None) -> None:
        self._config = config
        self._stats = stats
        self._errors_rng = rng
        self._jitter_rng = random.Random(rng.random())
        self._clock: Clock = clock if clock is not None else PerfClock()
        self._embedder = Embedder(dim=config.embedding_dim)
        self._ids = itertools.count()
        self._id_prefix = f"{os.urandom(3).hex()}{stats.row:x}"
        self._ttft = config.ttft_ms / 1000.0
        self._itl = config.itl_ms / 1000.0
        self._jitter = config.jitter_ms / 1000.0
        self._headers_delay = config.headers_delay_ms / 1000.0
        self._fault = Fault(config.fault) if config.fault else None
        close = [(b"connection", b"close")] if config.close_connections else []
        self._sse_headers = [*_SSE_HEADERS, *close]
        self._json_headers = [*_JSON_HEADERS, *close]
        self._prom_headers = [*_PROM_HEADERS, *close]
        self._models_body = orjson.dumps({
            "object": "list",
            "data": [{"id": config.model, "object": "model", "created": int(time.time()),
                      "owned_by": "aiperf-mock"}],
        })

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point: ``http`` and ``lifespan`` scopes; others are ignored."""
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = self._clock.now()
        path: str = scope["path"]
        route = _ROUTES.get(path.rstrip("/") if len(path) > 1 else path)
        if route is None:
            await self._error(send, _OTHER, 404, f"no route for {path}", "not_found_error")
            return
        method, endpoint = route
        if scope["method"].encode() != method:
            await self._error(send, endpoint, 405, f"{path} accepts {method.decode()} only",
                              "invalid_request_error")
            return
        if endpoint == _HEALTH:
            await self._respond(send, endpoint, 200, b'{"status":"ok"}', self._json_headers)
        elif endpoint == _MODELS:
            await self._respond(send, endpoint, 200, self._models_body, self._json_headers)
        elif endpoint == _STATS:
            await self._respond(send, endpoint, 200, orjson.dumps(self._stats.snapshot()), self._json_headers)
        elif endpoint == _METRICS:
            await self._respond(send, endpoint, 200, self._stats.prometheus(self._config.model),
                                self._prom_headers)
        else:
            await self._inference(t0, endpoint, receive, send)

    async def _inference(self, t0: float, endpoint: int, receive: Receive, send: Send) -> None:
        raw = await _read_body(receive)
        if raw is None:  # client left before sending its body
            self._stats.add(Counter.DISCONNECTS)
            return
        answer = CATALOG[endpoint].answer
        try:
            body = _parse(raw)
            if answer is Answer.VECTORS:
                inputs = self._embedding_inputs(body.get(CATALOG[endpoint].prompt_field))
            else:
                n, finish = self._output_length(body)
                prompt_tokens = self._prompt_tokens(endpoint, body)
        except BadRequest as exc:
            self._stats.add(Counter.BAD_REQUESTS)
            await self._error(send, endpoint, 400, str(exc), "invalid_request_error")
            return
        stats = self._stats
        stats.add(Counter.INFERENCE_REQUESTS)
        if self._config.error_rate > 0 and self._errors_rng.random() < self._config.error_rate:
            stats.add(Counter.INJECTED_ERRORS)
            await self._error(send, endpoint, 500, "injected error (mock server --error-rate)",
                              "server_error", code="mock_injected_error")
            return
        if self._fault is not None and self._errors_rng.random() < self._config.fault_rate:
            await self._faulty(receive, send)
            return
        model = body.get("model")
        model = model if isinstance(model, str) and model else self._config.model
        stats.add(Counter.IN_FLIGHT)
        try:
            if answer is Answer.VECTORS:
                await self._embeddings(t0, endpoint, model, inputs, body, send)
            elif body.get("stream"):
                if self._ttft > 0 or self._itl > 0 or self._jitter > 0:
                    await self._watched_stream(t0, endpoint, model, n, finish, prompt_tokens, receive, send)
                else:  # nothing to wait for: the stream is over before a disconnect could matter
                    await self._stream(t0, endpoint, model, n, finish, prompt_tokens, send, _Peer())
            else:
                await self._complete(t0, endpoint, model, n, finish, prompt_tokens, send)
        finally:
            stats.add(Counter.IN_FLIGHT, -1)

    async def _faulty(self, receive: Receive, send: Send) -> None:
        """`--fault`: answer like a broken server until done or the client leaves."""
        assert self._fault is not None
        self._stats.add(Counter.INJECTED_ERRORS)
        peer = _Peer()
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(_watch_disconnect(receive, peer))
            fault = tg.create_task(serve_fault(self._fault, send, self._sse_headers,
                                               trickle_ms=self._config.trickle_ms))
            await asyncio.wait([watcher, fault], return_when=asyncio.FIRST_COMPLETED)
            for task in (watcher, fault):
                task.cancel()

    # ---- request interpretation -------------------------------------------------------------

    def _output_length(self, body: dict[str, Any]) -> tuple[int, str]:
        """Tokens to emit and the finish reason: ``length`` iff a request maximum was reached."""
        requested = _opt_count(body, "max_completion_tokens")
        if requested is None:
            requested = _opt_count(body, "max_tokens")
        min_tokens = _opt_count(body, "min_tokens")
        if self._config.output_tokens is not None:
            n = self._config.output_tokens
        elif requested is not None:
            n = requested
        else:
            n = max(self._config.default_output_tokens, min_tokens or 0)
        return n, "length" if requested is not None and n == requested else "stop"

    @staticmethod
    def _prompt_tokens(endpoint: int, body: dict[str, Any]) -> int:
        field = CATALOG[endpoint].prompt_field
        if CATALOG[endpoint].answer is Answer.CHAT:
            messages = body.get(field)
            if not isinstance(messages, list):
                raise BadRequest(f"'{field}' must be a list of chat messages")
            return count_chat(messages)
        if field not in body:
            raise BadRequest(f"'{field}' is required")
        return count_prompt(body[field])

    @staticmethod
    def _embedding_inputs(value: Any) -> list[str]:
        inputs = embedding_inputs(value)
        if not inputs:
            raise BadRequest("'input' must be a non-empty string or list")
        return inputs

    def _delay(self, base: float) -> float:
        if self._jitter <= 0:
            return base
        return max(0.0, base + self._jitter_rng.uniform(-self._jitter, self._jitter))

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}-{self._id_prefix}{next(self._ids):x}"

    # ---- responses ----------------------------------------------------------------------------

    async def _watched_stream(self, t0: float, endpoint: int, model: str, n: int, finish: str,
                              prompt_tokens: int, receive: Receive, send: Send) -> None:
        """:meth:`_stream` while a sibling task waits for ``http.disconnect``.

        Granian's ASGI ``send`` does not raise after the client has gone, so without the watcher a
        long stream would keep "sending" (and counting tokens) to nobody.
        """
        peer = _Peer()
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(_watch_disconnect(receive, peer))
            try:
                await self._stream(t0, endpoint, model, n, finish, prompt_tokens, send, peer)
            finally:
                watcher.cancel()

    async def _stream(self, t0: float, endpoint: int, model: str, n: int, finish: str,
                      prompt_tokens: int, send: Send, peer: _Peer) -> None:
        created = int(time.time())
        if CATALOG[endpoint].answer is Answer.CHAT:
            rid = self._next_id("chatcmpl")
            head = (b'data: {"id":"' + rid.encode() + b'","object":"chat.completion.chunk","created":'
                    + str(created).encode() + b',"model":' + orjson.dumps(model) + b',"choices":[{"index":0,')
            first = head + b'"delta":{"role":"assistant","content":"'
            prefix = head + b'"delta":{"content":"'
            suffix = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
            last_choice: dict[str, Any] = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}
            obj = "chat.completion.chunk"
        else:
            rid = self._next_id("cmpl")
            prefix = (b'data: {"id":"' + rid.encode() + b'","object":"text_completion","created":'
                      + str(created).encode() + b',"model":' + orjson.dumps(model)
                      + b',"choices":[{"index":0,"text":"')
            first = prefix
            suffix = b'","logprobs":null,"finish_reason":null}]}\n\n'
            last_choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish}
            obj = "text_completion"
        stats, clock, vocab, words = self._stats, self._clock, VOCAB_JSON, len(VOCAB_JSON)
        sent = 0
        try:
            if self._headers_delay > 0:
                await clock.sleep_until(t0 + self._headers_delay)
            await send({"type": "http.response.start", "status": 200, "headers": self._sse_headers})
            stats.add(request_slot(endpoint, 200))
            ttft = self._delay(self._ttft)
            deadline = t0 + ttft
            for k in range(n):
                if k:
                    deadline += self._delay(self._itl)
                await clock.sleep_until(deadline)
                if peer.gone:
                    raise ConnectionResetError("client disconnected")
                if k == 0:
                    VLLM.prefill_done(stats, prompt_tokens=prompt_tokens, ttft_s=ttft)
                chunk = (first if k == 0 else prefix) + vocab[k % words] + suffix
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent += 1
            if n == 0:
                VLLM.prefill_done(stats, prompt_tokens=prompt_tokens, ttft_s=ttft)
            VLLM.finished(stats, tokens=n, finish=finish, latency_s=clock.now() - t0)
            usage = _usage(prompt_tokens, n)
            final = {"id": rid, "object": obj, "created": created, "model": model, "choices": [last_choice],
                     "usage": usage}
            await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(final) + b"\n\n",
                        "more_body": True})
            await send({"type": "http.response.body", "body": _DONE, "more_body": False})
        except OSError:  # client gone: seen by the watcher, or (ASGI 2.4 servers) raised by send
            stats.add(Counter.DISCONNECTS)
        else:
            stats.add(Counter.COMPLETED)
        finally:
            stats.add(Counter.OUTPUT_TOKENS, sent)
            stats.add(Counter.PROMPT_TOKENS, prompt_tokens)

    async def _complete(self, t0: float, endpoint: int, model: str, n: int, finish: str,
                        prompt_tokens: int, send: Send) -> None:
        ttft = self._delay(self._ttft)
        deadline = t0 + ttft
        for _ in range(n - 1):
            deadline += self._delay(self._itl)
        await self._clock.sleep_until(max(deadline, t0 + self._headers_delay))
        VLLM.prefill_done(self._stats, prompt_tokens=prompt_tokens, ttft_s=ttft)
        VLLM.finished(self._stats, tokens=n, finish=finish, latency_s=self._clock.now() - t0)
        text = generated_text(n)
        usage = _usage(prompt_tokens, n)
        if CATALOG[endpoint].answer is Answer.CHAT:
            body: dict[str, Any] = {
                "id": self._next_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            }
        else:
            body = {
                "id": self._next_id("cmpl"), "object": "text_completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            }
        self._stats.add(Counter.OUTPUT_TOKENS, n)
        self._stats.add(Counter.PROMPT_TOKENS, prompt_tokens)
        await self._respond(send, endpoint, 200, orjson.dumps(body), self._json_headers)
        self._stats.add(Counter.COMPLETED)

    async def _embeddings(self, t0: float, endpoint: int, model: str, inputs: list[str], body: dict[str, Any],
                          send: Send) -> None:
        await self._clock.sleep_until(max(t0 + self._delay(self._ttft), t0 + self._headers_delay))
        as_base64 = body.get("encoding_format") == "base64"
        embed = self._embedder.embed_base64 if as_base64 else self._embedder.embed
        prompt_tokens = count_prompt(body.get("input"))
        doc = {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": embed(text)}
                     for i, text in enumerate(inputs)],
            "model": model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        }
        self._stats.add(Counter.PROMPT_TOKENS, prompt_tokens)
        await self._respond(send, endpoint, 200, orjson.dumps(doc), self._json_headers)
        self._stats.add(Counter.COMPLETED)

    async def _error(self, send: Send, endpoint: int, status: int, message: str, kind: str,
                     code: str | None = None) -> None:
        doc = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        await self._respond(send, endpoint, status, orjson.dumps(doc), self._json_headers)

    async def _respond(self, send: Send, endpoint: int, status: int, body: bytes,
                       headers: list[tuple[bytes, bytes]]) -> None:
        self._stats.add(request_slot(endpoint, status))
        try:
            await send({"type": "http.response.start", "status": status,
                        "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body, "more_body": False})
        except OSError:
            self._stats.add(Counter.DISCONNECTS)


class _Peer:
    """Whether the client of one request has disconnected (set by :func:`_watch_disconnect`)."""

    __slots__ = ("gone",)

    def __init__(self) -> None:
        self.gone = False


async def _watch_disconnect(receive: Receive, peer: _Peer) -> None:
    """Mark ``peer`` gone once the server reports ``http.disconnect``; runs until cancelled."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            peer.gone = True
            return


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or ``None`` when the client disconnected first."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    parts = [body]
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _opt_count(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"'{key}' must be a non-negative integer, got {value!r}")
    return value


def app_from_env() -> MockApp:
    """Granian factory: build the app from :data:`~aiperf.mock_server.config.CONFIG_ENV`.

    Attaches to the shared counter file when the config names one (claiming this worker's row) and
    seeds the RNG with ``(seed, row)`` so each worker has its own reproducible error sequence.
    """
    config = MockConfig.from_env()
    stats = StatsBoard.attach(config.stats_path) if config.stats_path else StatsBoard.private()
    rng = random.Random(f"{config.seed}:{stats.row}") if config.seed is not None else random.Random()
    return MockApp(config=config, stats=stats, rng=rng)

