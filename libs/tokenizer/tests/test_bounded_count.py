"""A response made of one huge word (no spaces) is counted in bounded time, close to the exact
count; ordinary text is counted exactly as before (issue 10: the wedged record-processor)."""

from __future__ import annotations

import random
import string
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.tokenizer import load_tokenizer
from aiperf.tokenizer.bounded import WORD_LIMIT, count_bounded

HUGE_WORD_DEADLINE_S = 120.0
"""Generous: the pieces take a few seconds on a loaded 2-core machine; unbounded BPE on the
same 8 MiB word takes minutes."""


def _in_thread(fn, deadline_s: float):  # type: ignore[no-untyped-def]
    """`fn()` in a thread; its result, or an AssertionError when it is still running at the deadline."""
    out: list[int] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), f"still counting after {deadline_s:g} s"
    return out[0]


def test_an_8_mib_word_is_counted_in_bounded_time() -> None:
    tokenizer = load_tokenizer(None)
    word = "x7Qz" * (2 << 20)  # 8 MiB, no space
    count = _in_thread(lambda: tokenizer.count(f"answer: {word} done"), HUGE_WORD_DEADLINE_S)
    assert count >= len(word) // 8, count


def test_a_long_word_is_counted_within_one_token_per_piece() -> None:
    tokenizer = load_tokenizer(None)
    rng = random.Random(7)
    word = "".join(rng.choice(string.ascii_letters) for _ in range(5 * WORD_LIMIT + 123))
    text = f"Hello there {word} and goodbye"
    exact = len(tokenizer.encode(text))
    counted = tokenizer.count(text)
    pieces = -(-len(word) // WORD_LIMIT)
    assert exact <= counted <= exact + 2 * pieces, (exact, counted)


def test_the_hugging_face_tokenizer_is_bounded_too(hf_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(str(hf_tokenizer_dir))
    count = _in_thread(lambda: tokenizer.count("a" * (1 << 20)), HUGE_WORD_DEADLINE_S)
    assert count > 0


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab \n\u00e9"), max_size=3 * WORD_LIMIT))
def test_pieces_add_up_and_short_words_are_exact(text: str) -> None:
    """With a character count as the tokenizer, pieces must cover the text exactly once."""
    assert count_bounded(lambda s: len(s), text) == len(text)
    calls: list[str] = []
    count_bounded(lambda s: calls.append(s) or 0, text)
    assert all(len(w) <= WORD_LIMIT for call in calls for w in call.split())
    if not any(len(w) > WORD_LIMIT for w in text.split()):
        assert calls == [text]
