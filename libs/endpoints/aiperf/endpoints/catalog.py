"""The endpoint-kind catalog: every `--endpoint-type` and everything that varies with it, in one
table, as `aiperf.config.catalog` is for services. The worker's request bodies
(`PayloadBuilder`), the response parsing (`parse_response`), the worker's URL, streaming and
history, and the mock server's routes and answers all read it.

A new kind is one `EndpointSpec` here plus its two functions: the payload function (`prompt`:
the prompt field's value from the prompt and the conversation so far, `aiperf.endpoints.bodies`)
and the response function (`content`: the text a response body or stream event carries,
`aiperf.endpoints.answers`). Its `answer` names the shape the mock server answers it in.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiperf.config import EndpointKind
from aiperf.endpoints import answers, bodies

EndpointType = EndpointKind
"""OpenAI-compatible endpoint kinds (AIPerf's `--endpoint-type` values): the model's enum."""


class Answer(enum.StrEnum):
    """The shape of a kind's answers (what the mock server sends): chat completion (chunks) with
    `choices[0].message|delta.content`, text completion (chunks) with `choices[0].text`, or a list
    of vectors in `data` (never streamed)."""

    CHAT = "chat"
    TEXT = "text"
    VECTORS = "vectors"


@dataclass(frozen=True, kw_only=True)
class EndpointSpec:
    """One endpoint kind: its default URL `path`; the request's prompt field and its payload
    function `prompt(prompt, history)`; the output-limit field (`token_field`, None: no limit;
    `legacy_token_field` with `--use-legacy-max-tokens`); whether it `streams` (SSE), keeps a
    multi-turn `history` in the request and `produces_tokens`; its response function
    `content(obj)` ((text, reasoning) of one body or event, None when it carries none); the
    `no_result` message of a 2xx answer without any; and the `answer` shape."""

    kind: EndpointKind
    path: str
    prompt_field: str
    prompt: Callable[[bodies.Prompt, list[dict[str, Any]] | None], Any]
    content: Callable[[dict[str, Any]], tuple[str, str] | None]
    answer: Answer
    no_result: str
    token_field: str | None = None
    legacy_token_field: str | None = None
    streams: bool = False
    keeps_history: bool = False
    produces_tokens: bool = True


CATALOG: tuple[EndpointSpec, ...] = (
    EndpointSpec(kind=EndpointKind.CHAT, path="/v1/chat/completions", prompt_field="messages",
                 prompt=bodies.chat_messages, content=answers.chat_content, answer=Answer.CHAT,
                 no_result="No responses with actual content", token_field="max_completion_tokens",
                 legacy_token_field="max_tokens", streams=True, keeps_history=True),
    EndpointSpec(kind=EndpointKind.COMPLETIONS, path="/v1/completions", prompt_field="prompt",
                 prompt=bodies.one_prompt, content=answers.text_content, answer=Answer.TEXT,
                 no_result="No responses with actual content", token_field="max_tokens", streams=True),
    EndpointSpec(kind=EndpointKind.EMBEDDINGS, path="/v1/embeddings", prompt_field="input",
                 prompt=bodies.one_prompt, content=answers.vectors, answer=Answer.VECTORS,
                 no_result="No embeddings in response", produces_tokens=False),
)
"""Every endpoint kind (the mock server's routes keep this order)."""

SPECS: dict[str, EndpointSpec] = {str(spec.kind): spec for spec in CATALOG}


def spec_of(kind: EndpointKind | str) -> EndpointSpec:
    """The catalog entry of `kind` (KeyError for an unknown one)."""
    return SPECS[str(kind)]


def path_of(kind: EndpointKind | str) -> str:
    """The default URL path of `kind` (e.g. ``/v1/chat/completions``)."""
    return spec_of(kind).path


def produces_tokens(kind: EndpointKind | str) -> bool:
    """True when responses of `kind` carry generated text (chat, completions)."""
    return spec_of(kind).produces_tokens


__all__ = ["CATALOG", "SPECS", "Answer", "EndpointSpec", "EndpointType", "path_of", "produces_tokens", "spec_of"]
