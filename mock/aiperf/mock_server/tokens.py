"""What the mock "generates" and how it counts prompt tokens. Pure functions, no I/O.

Output text: token ``k`` of a response is ``VOCAB[k % len(VOCAB)]``, a common English word with a
leading space (``" the"``, ``" of"``, ...). Each such word is a single token in the GPT-2, cl100k,
Llama and Qwen vocabularies, so a client-side tokenizer counts about one token per emitted token,
and ``len(text.split())`` is exactly the number of tokens emitted.

Prompt tokens: the number of whitespace-separated words in the prompt text (all chat message text
parts, the completion prompt string(s), the embedding input string(s)); a prompt given as a list of
token ids counts one per id. This is deterministic and needs no tokenizer.
"""

from __future__ import annotations

import base64
import math
import sys
import zlib
from array import array
from typing import Any

import orjson

VOCAB: tuple[str, ...] = (
    " the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " was", " with",
    " be", " by", " on", " not", " he", " this", " are", " or", " his", " from", " at", " which",
    " but", " have", " an", " had", " they", " you", " were", " their", " one", " all", " we",
    " can", " her", " has", " there", " been", " if", " more", " when", " will", " would", " who",
    " so", " no",
)
"""The emitted tokens, cycled in order."""

VOCAB_JSON: tuple[bytes, ...] = tuple(orjson.dumps(word)[1:-1] for word in VOCAB)
"""Each token already escaped for splicing into a JSON string literal."""


def token_text(index: int) -> str:
    """Text of the ``index``-th generated token (0-based)."""
    return VOCAB[index % len(VOCAB)]


def generated_text(n: int) -> str:
    """The full text of an ``n``-token response: tokens ``0..n-1`` concatenated."""
    words = len(VOCAB)
    full, rest = divmod(n, words)
    return "".join(VOCAB) * full + "".join(VOCAB[:rest])


_WORD_MAP = bytes(32 if chr(c).isspace() else 120 for c in range(256))
"""Every Latin-1 character to ``b" "`` (what ``str.split()`` splits on) or ``b"x"`` (part of a word)."""
_LONG_TEXT = 4096
"""Characters from which a text is counted without splitting it (no object per word)."""


def count_words(text: str) -> int:
    """Prompt tokens of one string: its whitespace-separated word count, as ``len(text.split())``.

    A long Latin-1 text (a 1M-token agentic context of English) is counted with no object per
    word, in a few ms instead of ``str.split``'s ~0.1-0.2 s, which the first token would wait for."""
    if len(text) >= _LONG_TEXT:
        try:
            shape = text.encode("latin-1").translate(_WORD_MAP)
        except UnicodeEncodeError:  # wider characters (CJK, ...): split
            pass
        else:
            return shape.count(b" x") + (shape[:1] == b"x")
    return len(text.split())


def count_prompt(prompt: Any) -> int:
    """Prompt tokens of a completions ``prompt`` or embeddings ``input`` value.

    Accepts a string, a list of strings, a list of token ids, or a list of token-id lists; anything
    else counts 0 (the mock is lenient about shapes it does not use).
    """
    if isinstance(prompt, str):
        return count_words(prompt)
    if isinstance(prompt, list):
        total = 0
        for item in prompt:
            if isinstance(item, str):
                total += count_words(item)
            elif isinstance(item, int):
                total += 1
            elif isinstance(item, list):
                total += len(item)
        return total
    return 0


def count_chat(messages: Any) -> int:
    """Prompt tokens of a chat ``messages`` list: words of every string content and text part."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            total += count_words(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += count_words(part["text"])
    return total


def embedding_inputs(value: Any) -> list[str]:
    """Split an embeddings ``input`` into items, one vector each, as text keys for :func:`embed`.

    A string is one item; a list of token ids is one item; a list of strings or of id lists is one
    item per element.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if value and all(isinstance(v, int) for v in value):
            return [" ".join(map(str, value))]
        return [v if isinstance(v, str) else " ".join(map(str, v)) if isinstance(v, list) else ""
                for v in value]
    return []


class Embedder:
    """Deterministic unit-length vectors: the same text always maps to the same vector.

    A fixed base vector is rotated by ``crc32(text) % dim``; rotation keeps the norm, costs one list
    slice, and different texts usually get different vectors.
    """

    def __init__(self, *, dim: int) -> None:
        if dim < 1:
            raise ValueError("embedding dim must be >= 1")
        raw = [math.sin(0.7 * i + 0.3) for i in range(dim)]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        self._base = [round(x / norm, 6) for x in raw]
        self.dim = dim

    def embed(self, text: str) -> list[float]:
        """The vector of ``text`` (length ``dim``)."""
        shift = zlib.crc32(text.encode()) % self.dim
        return self._base[shift:] + self._base[:shift]

    def embed_base64(self, text: str) -> str:
        """The vector of ``text`` as base64 of little-endian float32, as OpenAI's ``encoding_format``."""
        vec = array("f", self.embed(text))
        if sys.byteorder == "big":  # pragma: no cover - the wire format is little-endian
            vec.byteswap()
        return base64.b64encode(vec.tobytes()).decode()
