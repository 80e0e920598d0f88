"""A local Hugging Face ``tokenizer.json`` through the ``tokenizers`` package (no transformers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer

from aiperf.tokenizer.bounded import count_bounded


class HuggingFaceTokenizer:
    """Wraps ``tokenizers.Tokenizer.from_file``; adds no special tokens, keeps them on decode."""

    def __init__(self, path: Path) -> None:
        """Load the tokenizer.json at ``path``; raises whatever ``tokenizers`` raises on bad JSON."""
        self._name = str(path)
        self._impl = _HFTokenizer.from_file(str(path))

    @property
    def name(self) -> str:
        """The tokenizer.json path."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without BOS/EOS or other template tokens."""
        ids: list[int] = self._impl.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens included."""
        return self._impl.decode(list(ids), skip_special_tokens=False)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, in bounded time (`aiperf.tokenizer.bounded`: words
        longer than 4096 characters are counted in pieces, estimated beyond 256 KiB).

        Single-text ``encode`` on purpose: the batch APIs start the Rust thread pool, which
        misbehaves in processes that fork afterwards.
        """
        return count_bounded(self._count, text)

    def _count(self, text: str) -> int:
        return len(self._impl.encode(text, add_special_tokens=False))

    def __repr__(self) -> str:
        return f"HuggingFaceTokenizer({self._name!r})"
