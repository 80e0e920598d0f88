"""`PyBpe`: tiktoken's encoding in plain Python, for short texts before tiktoken's maps exist.

tiktoken's `CoreBPE` constructor converts the whole vocabulary (248k tokens for Qwen 3.6) into
its Rust maps, ~0.2-0.3 s holding the GIL; in a one-request run that is most of the tokenizer's
cost, and it sits on the path to the first request. The texts such a run tokenizes (the
synthetic corpus, a prompt, one response) are a few thousand characters, which this encoder
handles in milliseconds straight from the ranks dict. The result is tiktoken's, token for
token: the same pre-tokenizer pattern (compiled with `regex`, the engine tiktoken's own Python
layer uses; tiktoken requires it), each piece that is a token looked up, any other merged by
the same rule (repeatedly the adjacent pair of lowest rank, the leftmost on a tie), special
tokens split out first (every one allowed, as `encode(allowed_special="all")`).
`tests/test_pybpe.py` checks equality with tiktoken on the corpus, prompts and odd text.
"""

from __future__ import annotations

import importlib
import itertools
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any

# tiktoken requires `regex` (its pattern syntax: \p{L}, scoped flags); imported by name so the
# build does not need a requirement of its own for it.
_regex: Any = importlib.import_module("regex")

MAX_MERGE = 64
"""Longest piece (bytes) merged here: merging is quadratic in a piece's length in this loop, so
`encode` declines text with a longer piece that is not a token (a run of random letters)."""


class PyBpe:
    """Encodes and decodes like ``tiktoken.Encoding(pat_str=pattern, mergeable_ranks=ranks,
    special_tokens=special)`` with every special token allowed. Immutable; safe to share between
    threads."""

    def __init__(self, ranks: Mapping[bytes, int], pattern: str, special: Mapping[str, int]) -> None:
        """``ranks``: token bytes -> id (kept, not copied); ``special``: token text -> id."""
        self._ranks = ranks
        self._pattern = _regex.compile(pattern)
        self._special = dict(special)
        # Longest first, so a special token that starts another never cuts it short.
        names = sorted(self._special, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, names))) if names else None
        # id -> bytes: the ranks' keys themselves when the ranks are 0..n-1 in order (tiktoken
        # files are; ~15 ms for Qwen's 248k instead of ~40 ms for an inverted dict).
        dense = all(map(operator.eq, ranks.values(), itertools.count()))
        self._by_rank: list[bytes] | None = list(ranks) if dense else None
        self._by_id: dict[int, bytes] = {} if dense else dict(zip(ranks.values(), ranks.keys(), strict=True))
        self._special_bytes = {rank: token.encode() for token, rank in self._special.items()}
        self.merged_bytes = 0
        """Bytes of the pieces merged so far (each ~10x the cost of a piece that is a token);
        counted without a lock, so concurrent calls may undercount a little."""

    def encode(self, text: str) -> list[int] | None:
        """Token ids of ``text`` (not normalised here); lone surrogates are replaced first,
        as tiktoken does. None when a piece of it that is no token is longer than `MAX_MERGE`
        bytes (leave such text to tiktoken)."""
        try:
            return self._encode(text)
        except UnicodeEncodeError:
            return self._encode(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The bytes of ``ids``; raises `KeyError` for an id that is no token."""
        by_rank, by_id, special = self._by_rank, self._by_id, self._special_bytes
        if by_rank is not None:
            size = len(by_rank)
            return b"".join([by_rank[i] if 0 <= i < size else special[i] for i in ids])
        return b"".join([by_id[i] if i in by_id else special[i] for i in ids])

    def _encode(self, text: str) -> list[int] | None:
        out: list[int] = []
        start = 0
        if self._special_re is not None:
            for match in self._special_re.finditer(text):
                if not self._encode_ordinary(text[start:match.start()], out):
                    return None
                out.append(self._special[match.group()])
                start = match.end()
        return out if self._encode_ordinary(text[start:], out) else None

    def _encode_ordinary(self, text: str, out: list[int]) -> bool:
        """Appends the ids of `text` to `out`; False (out half-filled) for a piece too long to merge."""
        ranks = self._ranks
        for piece in self._pattern.findall(text):
            data = piece.encode()
            rank = ranks.get(data)
            if rank is not None:
                out.append(rank)
            elif len(data) > MAX_MERGE:
                return False
            else:
                self.merged_bytes += len(data)
                out += _merge(ranks, data)
        return True


def _merge(ranks: Mapping[bytes, int], data: bytes) -> list[int]:
    """tiktoken's byte-pair merge of one piece that is not itself a token."""
    parts = [data[i:i + 1] for i in range(len(data))]
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = i, rank
        if best_rank is None:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return [ranks[part] for part in parts]
