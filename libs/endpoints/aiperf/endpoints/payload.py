"""Request bodies for OpenAI-compatible endpoints, built on the worker's hot path.

Everything that does not change between requests (model, stream flags, `--extra-inputs`) is
serialized once in the constructor; `build` only serializes the prompt (and history) and splices
bytes together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import orjson

from aiperf.config import Endpoint
from aiperf.endpoints.bodies import Parts, Prompt
from aiperf.endpoints.catalog import EndpointSpec, EndpointType, spec_of

LONG_PROMPT = 1 << 16
"""Characters from which a prompt is encoded by `_LONG_ENCODER` (orjson below: ~0.5 us faster)."""
_LONG_ENCODER = msgspec.json.Encoder()
"""A long prompt's JSON: the same bytes as orjson's for str/list/dict/int values, ~2x faster, with
~1.5 bytes of transient memory per byte of prompt where orjson reserves ~14 (a 1M-token chat
body: 1.7 ms and 11 MiB instead of 4.5 ms and 68 MiB)."""


class PayloadBuilder:
    """Builds JSON request bodies for one endpoint, model and streaming mode, from its kind's
    catalog entry (`aiperf.endpoints.catalog`: prompt field and payload function, output-limit
    field, whether it streams).

    Field rules (as AIPerf 0.13):

    - chat: ``messages = [*history, {"role": "user", "content": prompt}]``, ``model``,
      ``stream``; ``max_completion_tokens`` (``max_tokens`` when `use_legacy_max_tokens`) only
      when a limit is given.
    - completions: ``prompt = [prompt]`` (a one-element list, as AIPerf sends it), ``model``,
      ``stream``, ``max_tokens`` when given.
    - embeddings: ``input = [prompt]``, ``model``; never streams, no token limit.
    - a turn of several texts (AIPerf's prompt batch), images or audios: chat ``content`` is a
      list of parts (``text``, ``image_url``, ``input_audio``); completions and embeddings send
      every text in the list.
    - streaming (chat, completions) adds ``"stream": true, "stream_options":
      {"include_usage": true}``.
    - `extra_inputs` are merged last and override any field above. When they turn streaming off
      (``"stream": false``) our ``stream_options`` is dropped, since servers reject it then.
    """

    __slots__ = ("_spec", "_prompt_key", "_token_key", "_static", "_static_inner", "_slow", "_model_fixed")

    def __init__(
        self,
        *,
        endpoint_type: EndpointType,
        model: str,
        streaming: bool,
        extra_inputs: dict[str, Any] | None = None,
        use_legacy_max_tokens: bool = False,
    ) -> None:
        spec: EndpointSpec = spec_of(endpoint_type)
        self._spec, self._prompt_key = spec, spec.prompt_field
        self._token_key = (spec.legacy_token_field if use_legacy_max_tokens else None) or spec.token_field or ""
        extras = dict(extra_inputs or {})
        static: dict[str, Any] = {"model": model}
        if spec.streams:
            static["stream"] = streaming
            if streaming:
                static["stream_options"] = {"include_usage": True}
        static.update(extras)
        if not static.get("stream") and "stream_options" not in extras:
            static.pop("stream_options", None)
        self._static = static
        inner = orjson.dumps(static)[1:-1]
        self._static_inner = b"," + inner if inner else b""
        # Extras that override a per-request field force the (slower) dict merge.
        self._slow = self._prompt_key in extras or (bool(self._token_key) and self._token_key in extras)
        self._model_fixed = "model" in extras

    def for_model(self, model: str) -> PayloadBuilder:
        """This builder sending `model` instead (a benchmark of several models: each turn's
        model). A ``model`` in `extra_inputs` still wins, as it does over the configured one.
        Returns `self` when nothing changes."""
        if self._model_fixed or self._static.get("model") == model:
            return self
        other = object.__new__(PayloadBuilder)
        for name in self.__slots__:
            object.__setattr__(other, name, getattr(self, name))
        other._static = {**self._static, "model": model}
        inner = orjson.dumps(other._static)[1:-1]
        other._static_inner = b"," + inner if inner else b""
        return other

    @classmethod
    def of(cls, endpoint: Endpoint, model: str) -> PayloadBuilder:
        """The builder for `endpoint`'s requests to `model`."""
        return cls(endpoint_type=endpoint.type, model=model, streaming=endpoint.streaming,
                   extra_inputs=endpoint.extra, use_legacy_max_tokens=endpoint.use_legacy_max_tokens)

    @property
    def endpoint_type(self) -> EndpointType:
        """The endpoint kind this builder formats for."""
        return self._spec.kind

    def output_limit(self, max_tokens: int | None) -> int | None:
        """The output limit `build(..., max_tokens=max_tokens)` sends (None: none is sent, as
        for embeddings)."""
        return int(max_tokens) if self._token_key and max_tokens is not None else None

    def build(
        self, prompt: str, *, max_tokens: int | None, history: list[dict[str, Any]] | None = None,
        texts: Sequence[str] = (), images: Sequence[str] = (), audios: Sequence[str] = (),
    ) -> bytes:
        """Return the UTF-8 JSON body for one request.

        `history` (chat only) holds the earlier messages of a multi-turn conversation; it is
        ignored by completions and embeddings. `max_tokens` of None sends no limit (the server
        decides). A turn of several pieces (`texts`, the separate prompts `prompt` joins;
        `images`; `audios`) is sent as AIPerf sends it: chat content parts, or every text in
        the completions/embeddings list. Never blocks; raises `TypeError` only for values JSON
        cannot represent.
        """
        whole: Prompt = prompt
        if len(texts) > 1 or images or audios:
            whole = Parts(texts=texts or ((prompt,) if prompt else ()), images=images, audios=audios)
        value = self._spec.prompt(whole, history)
        limit = max_tokens if self._token_key and max_tokens is not None else None
        if self._slow:
            body: dict[str, Any] = {self._prompt_key: value}
            if limit is not None:
                body[self._token_key] = limit
            body.update(self._static)
            return orjson.dumps(body)
        if len(prompt) < LONG_PROMPT:
            head = b'{"' + self._prompt_key.encode() + b'":' + orjson.dumps(value)
            if limit is not None:
                head += b',"' + self._token_key.encode() + b'":' + str(int(limit)).encode()
            return head + self._static_inner + b"}"
        try:  # a long prompt (1M tokens: ~5 MB) copied once into the body
            prompt_json = _LONG_ENCODER.encode(value)
        except UnicodeEncodeError as exc:  # a lone surrogate: what orjson raises, a TypeError
            raise TypeError(str(exc)) from None
        parts = [b'{"', self._prompt_key.encode(), b'":', prompt_json]
        if limit is not None:
            parts += (b',"', self._token_key.encode(), b'":', str(int(limit)).encode())
        return b"".join((*parts, self._static_inner, b"}"))
