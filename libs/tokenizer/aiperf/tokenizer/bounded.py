"""Token counts in bounded time for any text, also one multi-megabyte word without a space.

BPE merges within one pre-tokenized word, and its cost grows faster than the word's length (a
single 8 MiB word of random letters: about 50 s for the bundled tokenizer on a busy 2-core
machine, against 3.5 s for 1 MiB), so a response made of one huge word stalls a
record-processor and the records behind it. A run of non-space characters longer than
`WORD_LIMIT` is therefore counted in `WORD_LIMIT`-character pieces, and only its first
`SAMPLE_LIMIT` characters are tokenized: the rest is estimated at the rate of that sample.

Effect on counts: text without such a run is counted exactly, as before. A run of up to
`SAMPLE_LIMIT` characters counts the tokens of its pieces, so a token that would have spanned a
cut is counted as two: at most one extra token per 4096 characters (well under 1 % for the
bundled tokenizer, which averages more than one character per token on such text). A longer
run is an estimate: its sample's tokens per character times its length, rounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable

WORD_LIMIT = 4096
"""Longest run of non-space characters counted in one piece."""
SAMPLE_LIMIT = 64 * WORD_LIMIT
"""Characters of one long run that are tokenized; the rest is estimated from them."""

_LONG_WORD = re.compile(r"(?<!\S)\S{%d,}" % (WORD_LIMIT + 1))
"""A run longer than the limit, matched from its start only (the lookbehind keeps the search
linear: it never restarts inside a word)."""


def count_bounded(count: Callable[[str], int], text: str) -> int:
    """`count(text)`, except that runs of non-space characters longer than `WORD_LIMIT` are
    counted in pieces, and estimated beyond `SAMPLE_LIMIT` (see the module docstring). Linear
    in `len(text)`; `count` never sees a word longer than `WORD_LIMIT` nor more than
    `SAMPLE_LIMIT` characters of one."""
    total, start = 0, 0
    for match in _LONG_WORD.finditer(text):
        if match.start() > start:
            total += count(text[start:match.start()])
        total += _count_long_word(count, match.group())
        start = match.end()
    if start == 0:
        return count(text)
    if start < len(text):
        total += count(text[start:])
    return total


def _count_long_word(count: Callable[[str], int], word: str) -> int:
    sample = word[:SAMPLE_LIMIT]
    tokens = sum(count(sample[i:i + WORD_LIMIT]) for i in range(0, len(sample), WORD_LIMIT))
    if len(word) > len(sample):
        tokens = round(tokens * len(word) / len(sample))
    return tokens
