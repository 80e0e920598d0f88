"""Payload functions of the endpoint kinds (`aiperf.endpoints.catalog`): the value of a request's
prompt field, from the prompt and the conversation so far. Pure, and on the worker's hot path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Parts:
    """A turn of several pieces: `texts` (several prompts of one request, AIPerf's prompt batch),
    `images` (URLs or `data:` URIs) and `audios` (`<format>,<base64>`), each sent in order."""

    texts: Sequence[str] = ()
    images: Sequence[str] = ()
    audios: Sequence[str] = ()


Prompt = str | Parts
"""What a payload function takes: one text, or a turn of several pieces."""


def content_parts(parts: Parts) -> list[dict[str, Any]]:
    """A chat message's `content` as AIPerf 0.13 renders a turn of several pieces: a text part
    per text, an `image_url` part per image, an `input_audio` part per audio (empty ones
    skipped)."""
    out: list[dict[str, Any]] = [{"type": "text", "text": t} for t in parts.texts if t]
    out += [{"type": "image_url", "image_url": {"url": i}} for i in parts.images if i]
    for audio in parts.audios:
        fmt, _, data = audio.partition(",")
        if audio:
            out.append({"type": "input_audio", "input_audio": {"data": data, "format": fmt}})
    return out


def chat_messages(prompt: Prompt, history: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """`messages`: the conversation so far, then the prompt as the user's message (a list of
    content parts for a turn of several pieces)."""
    user = {"role": "user", "content": prompt if isinstance(prompt, str) else content_parts(prompt) or ""}
    return [*history, user] if history else [user]


def one_prompt(prompt: Prompt, history: list[dict[str, Any]] | None) -> list[str]:
    """`prompt` / `input`: the prompt alone as a one-element list, or every text of a batch (as
    AIPerf sends them; a conversation's history is not sent)."""
    return [prompt] if isinstance(prompt, str) else [t for t in prompt.texts if t]


__all__ = ["Parts", "Prompt", "chat_messages", "content_parts", "one_prompt"]
