"""What a dataset is made of: conversations of turns, as stored in ``dataset.dat``.

Fields are appended with defaults only (older readers skip newer fields).
"""

from __future__ import annotations

from typing import Any

import msgspec


class Turn(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One request of a conversation.

    ``text`` is the whole user text (several ``texts`` joined by a newline); ``texts`` keeps the
    separate pieces when the source had more than one (batched embeddings/rankings).
    ``input_tokens`` is ``text`` counted with the dataset's tokenizer. ``max_tokens`` is the
    requested output length (None: let the server decide). ``timestamp_ms`` is the trace's
    absolute send time (fixed schedule); ``delay_ms`` the wait after the previous turn finished.
    ``model`` is the model this turn is sent to (None: the benchmark's one model); set when the
    benchmark names several (`aiperf.dataset.model_selection`).
    """

    text: str
    input_tokens: int
    max_tokens: int | None = None
    timestamp_ms: float | None = None
    delay_ms: float | None = None
    texts: list[str] = []
    role: str | None = None
    images: list[str] = []
    audios: list[str] = []
    extra: dict[str, Any] = {}
    model: str | None = None


class Conversation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A session: turns sent in order, each after the previous one's reply."""

    id: str
    turns: list[Turn]
