"""Fixtures: hand-built records with known timestamps (helpers are fixtures: pytest 9 does not put
this folder on sys.path)."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from aiperf.messages import Phase, RequestRecord

MS = 1_000_000


def sse_chat(words: list[str], usage: dict | None = None) -> list[bytes]:
    """One read per word, then a usage chunk (if any) and [DONE] in the final read."""
    chunks = []
    for w in words:
        obj = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": w}}]}
        chunks.append(b"data: " + orjson.dumps(obj) + b"\n\n")
    tail = b""
    if usage is not None:
        tail += b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": [], "usage": usage})
        tail += b"\n\n"
    chunks[-1] += tail + b"data: [DONE]\n\n"
    return chunks


def streaming_record(n_tokens: int = 5, *, first_ms: int = 40, gap_ms: int = 8,
                     phase: Phase = Phase.PROFILING, credit_num: int = 0, **kw: object) -> RequestRecord:
    """`n_tokens` one-word chunks: first at `first_ms`, then every `gap_ms`; start_ns = 1 s."""
    start = 1_000 * MS
    ts = [start + (first_ms + i * gap_ms) * MS for i in range(n_tokens)]
    args: dict = {
        "worker_id": "worker_1", "phase": phase, "credit_num": credit_num, "conversation_id": "conv_0",
        "model": "m", "endpoint": "/v1/chat/completions", "streaming": True, "input_tokens": 100,
        "start_ns": start, "start_wall_ns": 1_700_000_000_000_000_000, "end_ns": ts[-1] + MS, "status": 200,
        "chunk_ns": ts, "chunks": sse_chat([f"w{i} " for i in range(n_tokens)]), "x_request_id": "rid",
    }
    args.update(kw)
    return RequestRecord(**args)


def words(text: str) -> int:
    """A toy tokenizer: one token per whitespace-separated word."""
    return len(text.split())


@pytest.fixture
def make_record() -> Callable[..., RequestRecord]:
    """Factory fixture for `streaming_record`."""
    return streaming_record


@pytest.fixture
def chat_chunks() -> Callable[..., list[bytes]]:
    """Factory fixture for `sse_chat`."""
    return sse_chat
