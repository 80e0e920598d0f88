"""Line schemas of user dataset files, with AIPerf 0.13's field names. Unknown fields are ignored."""

from __future__ import annotations

from typing import Any

import msgspec


class TextGroup(msgspec.Struct, kw_only=True):
    """A named group of texts (``{"name": "passages", "contents": [...]}``) inside ``texts``."""

    name: str | None = None
    contents: list[str] = []


class SingleTurnRecord(msgspec.Struct, kw_only=True):
    """One ``single_turn`` line (also a turn of ``multi_turn`` and an entry of ``random_pool``).

    ``timestamp`` and ``delay`` are milliseconds; ``output_length`` becomes ``max_tokens``.
    """

    text: str | None = None
    texts: list[str | TextGroup] | None = None
    image: str | None = None
    images: list[str] | None = None
    audio: str | None = None
    audios: list[str] | None = None
    timestamp: float | None = None
    delay: float | None = None
    role: str | None = None
    session_id: str | None = None
    output_length: int | None = None
    extra: dict[str, Any] | None = None

    def all_texts(self) -> list[str]:
        """``text`` and every string of ``texts`` (groups flattened), in file order."""
        out = [self.text] if self.text is not None else []
        for item in self.texts or []:
            out += [item] if isinstance(item, str) else item.contents
        return out

    def all_images(self) -> list[str]:
        """``image`` then ``images``."""
        return ([self.image] if self.image is not None else []) + (self.images or [])

    def all_audios(self) -> list[str]:
        """``audio`` then ``audios``."""
        return ([self.audio] if self.audio is not None else []) + (self.audios or [])


class MultiTurnRecord(msgspec.Struct, kw_only=True):
    """One ``multi_turn`` line: a whole session."""

    turns: list[SingleTurnRecord]
    session_id: str | None = None


class MooncakeRecord(msgspec.Struct, kw_only=True):
    """One ``mooncake_trace`` line: a request of ``input_length`` tokens whose blocks are ``hash_ids``.

    ``text_input`` (literal prompt) replaces synthesis. Lines sharing a ``session_id`` are the
    turns of one conversation, in file order.
    """

    timestamp: float | None = None
    input_length: int | None = None
    text_input: str | None = None
    output_length: int | None = None
    hash_ids: list[int] = []
    delay: float | None = None
    session_id: str | None = None
