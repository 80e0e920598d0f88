"""Response functions of the endpoint kinds (`aiperf.endpoints.catalog`): what one response body,
or one event of a stream, carries: (text, reasoning), or None when it carries nothing. Pure:
never raises on bad server output."""

from __future__ import annotations

from typing import Any


def _choice(obj: dict[str, Any]) -> dict[str, Any] | None:
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return choices[0]


def chat_content(obj: dict[str, Any]) -> tuple[str, str] | None:
    """A chat completion (chunk): `choices[0].delta` (streaming) or `.message`, its `content`
    and its `reasoning_content` (or `reasoning`)."""
    choice = _choice(obj)
    part = choice.get("delta") if choice is not None else None
    if choice is not None and not isinstance(part, dict):
        part = choice.get("message")
    if not isinstance(part, dict):
        return None
    text, reasoning = part.get("content"), part.get("reasoning_content") or part.get("reasoning")
    text = text if isinstance(text, str) else ""
    reasoning = reasoning if isinstance(reasoning, str) else ""
    return (text, reasoning) if text or reasoning else None


def text_content(obj: dict[str, Any]) -> tuple[str, str] | None:
    """A text completion (chunk): `choices[0].text`."""
    choice = _choice(obj)
    text = choice.get("text") if choice is not None else None
    return (text, "") if isinstance(text, str) and text else None


def vectors(obj: dict[str, Any]) -> tuple[str, str] | None:
    """Embeddings: a result (no text) when `data` is a non-empty list."""
    data = obj.get("data")
    return ("", "") if isinstance(data, list) and data else None


__all__ = ["chat_content", "text_content", "vectors"]
