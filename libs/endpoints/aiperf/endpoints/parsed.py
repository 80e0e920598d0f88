"""What a response said, once parsed: timed content pieces, usage, or an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from aiperf.messages import ErrorDetails


class ContentResponse(NamedTuple):
    """One response that carried generated text: answer `text` and/or `reasoning` text.

    `ts_ns` is the perf_counter_ns of the read that completed it (streaming) or the end of the
    body (non-streaming).
    """

    ts_ns: int
    text: str
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the server reported (OpenAI `usage`); a field is None when absent."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """The parse of one `RequestRecord`.

    `responses` lists content responses in arrival order (those with non-empty text or
    reasoning; usage-only and role-only chunks are left out). `last_response_ns` is the
    timestamp of the last response of any kind (0 when there was none). `streamed` is True
    when the body really was an event stream. `error` is set when the request failed; the
    other fields then hold whatever could be read before the failure.
    """

    responses: list[ContentResponse] = field(default_factory=list)
    usage: Usage | None = None
    error: ErrorDetails | None = None
    last_response_ns: int = 0
    streamed: bool = False

    @property
    def ok(self) -> bool:
        """True when the request succeeded."""
        return self.error is None

    @property
    def text(self) -> str:
        """All answer text, concatenated in arrival order."""
        return "".join(r.text for r in self.responses)

    @property
    def reasoning_text(self) -> str:
        """All reasoning text (`reasoning_content`), concatenated in arrival order."""
        return "".join(r.reasoning for r in self.responses)
