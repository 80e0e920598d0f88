"""Token counts in bounded time for any text, also one multi-megabyte word without a space.

BPE merges within one pre-tokenized word, and its cost grows faster than the word's length (a
single 8 MiB word takes the bundled tokenizer minutes), so a response made of one huge word would
stall a record-processor. A run of non-space characters longer than `WORD_LIMIT` is therefore
counted in `WORD_LIMIT`-character pieces, and the text around it as it is.

Effect on counts: text without such a run is counted exactly, as before. A longer run counts
the tokens of its pieces, so a token that would have spanned a cut is counted as two: at most
one extra token per cut (one per 4096 characters; for the bundled tokenizer, which averages
several characters per token on such text, an error well under 1 %).
"""

from __future__ import annotations

import re
from collections.abc import Callable

WORD_LIMIT = 4096
"""Longest run of non-space characters counted in one piece."""

_LONG_WORD = re.compile(r"(?<!\S)\S{%d,}" % (WORD_LIMIT + 1))
"""A run longer than the limit, matched from its start only (the lookbehind keeps the search
linear: it never restarts inside a word)."""


def count_bounded(count: Callable[[str], int], text: str) -> int:
    """`count(text)`, except that runs of non-space characters longer than `WORD_LIMIT` are
    counted in `WORD_LIMIT`-character pieces (see the module docstring). Linear in `len(text)`
    apart from `count` itself, which never sees a word longer than `WORD_LIMIT`."""
    total, start = 0, 0
    for match in _LONG_WORD.finditer(text):
        if match.start() > start:
            total += count(text[start:match.start()])
        word = match.group()
        total += sum(count(word[i:i + WORD_LIMIT]) for i in range(0, len(word), WORD_LIMIT))
        start = match.end()
    if start == 0:
        return count(text)
    if start < len(text):
        total += count(text[start:])
    return total
