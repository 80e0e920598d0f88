"""Payload functions of the endpoint kinds (`aiperf.endpoints.catalog`): the value of a request's
prompt field, from the prompt and the conversation so far. Pure, and on the worker's hot path."""

from __future__ import annotations

from typing import Any


def chat_messages(prompt: str, history: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """`messages`: the conversation so far, then the prompt as the user's message."""
    user = {"role": "user", "content": prompt}
    return [*history, user] if history else [user]


def one_prompt(prompt: str, history: list[dict[str, Any]] | None) -> list[str]:
    """`prompt` / `input`: the prompt alone, as a one-element list (as AIPerf sends it; a
    conversation's history is not sent)."""
    return [prompt]


__all__ = ["chat_messages", "one_prompt"]
