"""The `Tokenizer` port every consumer (dataset, record processors) depends on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """Text <-> token ids. Implementations are immutable and safe to share between threads.

    Special-token strings that appear in text (``<|im_end|>``) are recognised as single tokens,
    and no BOS/EOS tokens are added, so ``count`` measures exactly what a server would see of
    the text itself.
    """

    @property
    def name(self) -> str:
        """A human-readable identity, e.g. ``builtin:qwen3.6`` or the tokenizer.json path."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without added special tokens."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; invalid byte sequences become U+FFFD rather than raising."""
        ...

    def count(self, text: str) -> int:
        """``len(encode(text))``, as cheaply as the backend allows (used once per request), in
        bounded time: a word longer than 4096 characters is counted in pieces, which may add one
        token per piece, and estimated beyond 256 KiB (`aiperf.tokenizer.bounded`)."""
        ...
