"""`PromptSynthesizer`: text of an exact token length, stitched from word-aligned corpus slices.

Slices start on word boundaries (a token that begins with whitespace), so joining them rarely
changes how the text re-tokenizes; `text` then checks the count and trims or extends until it
is exact. Everything random comes from the caller's ``numpy.random.Generator``, so output is a
pure function of the generator state and the tokenizer.
"""

from __future__ import annotations

import numpy as np

from aiperf.dataset.corpus import CORPUS
from aiperf.tokenizer import Tokenizer

MIN_SLICE = 8
MAX_SLICE = 48
_FIXUP_ROUNDS = 4


class PromptSynthesizer:
    """Makes prompts for one tokenizer. Build with `PromptSynthesizer.of` (cached per tokenizer)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        """Tokenize the bundled corpus once (a few ms)."""
        self.tokenizer = tokenizer
        ids = tokenizer.encode(" ".join(CORPUS.split()))
        self._ids2 = ids + ids  # a slice starting anywhere in the first copy never runs out
        self._starts = np.asarray(_word_starts(tokenizer, ids), dtype=np.int64)
        self._corpus_len = len(ids)

    @staticmethod
    def of(tokenizer: Tokenizer) -> PromptSynthesizer:
        """The shared synthesizer for ``tokenizer``."""
        synth = _SHARED.get(id(tokenizer))
        if synth is None:
            synth = _SHARED[id(tokenizer)] = PromptSynthesizer(tokenizer)
        return synth

    def token_ids(self, n: int, rng: np.random.Generator) -> list[int]:
        """``n`` token ids (n >= 0) made of random word-aligned corpus slices."""
        out: list[int] = []
        max_slice = min(MAX_SLICE, self._corpus_len)
        while len(out) < n:
            k = (n - len(out)) // MIN_SLICE + 1
            starts = self._starts[rng.integers(0, len(self._starts), size=k)].tolist()
            lengths = rng.integers(min(MIN_SLICE, max_slice), max_slice + 1, size=k).tolist()
            for start, length in zip(starts, lengths, strict=True):
                take = min(length, n - len(out))
                out += self._ids2[start:start + take]
                if len(out) >= n:
                    break
        return out

    def text(self, n: int, rng: np.random.Generator) -> tuple[str, int]:
        """Text of ``n`` tokens (n >= 1) and its actual count (equal to ``n`` except in rare cases)."""
        text = self.tokenizer.decode(self.token_ids(n, rng)).lstrip()
        count = self.tokenizer.count(text)
        for _ in range(_FIXUP_ROUNDS):
            if count == n:
                break
            if count > n:
                text = self.tokenizer.decode(self.tokenizer.encode(text)[:n])
            else:
                text += self.tokenizer.decode(self.token_ids(n - count, rng))
            count = self.tokenizer.count(text)
        return text, count


# Keyed by id(): each entry holds its tokenizer, so the id cannot be reused while cached.
# Tokenizers are themselves cached per process, so this stays a handful of entries.
_SHARED: dict[int, PromptSynthesizer] = {}


def _word_starts(tokenizer: Tokenizer, ids: list[int]) -> list[int]:
    """Positions whose token begins with whitespace in context.

    Decoding a token pair rather than a lone token, because SentencePiece-style decoders drop
    the leading space of the first token. Falls back to every position for tokenizers that mark
    no word boundaries (e.g. character-level), trading re-tokenization stability for variety.
    """
    starts = []
    for i in range(1, len(ids)):
        head = tokenizer.decode(ids[i - 1:i])
        pair = tokenizer.decode(ids[i - 1:i + 1])
        if pair.startswith(head) and pair[len(head):len(head) + 1].isspace():
            starts.append(i)
    return starts if len(starts) * 20 >= len(ids) else list(range(len(ids)))

