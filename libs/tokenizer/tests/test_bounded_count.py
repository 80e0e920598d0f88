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
from aiperf.tokenizer.bounded import SAMPLE_LIMIT, WORD_LIMIT, count_bounded

HUGE_WORD_DEADLINE_S = 60.0
"""Generous: the sample takes well under a second; unbounded BPE on the same 8 MiB word took
about 50 s on a busy 2-core machine."""


def _in_thread(fn, deadline_s: float):  # type: ignore[no-untyped-def]
    """`fn()` in a thread; its result, or an AssertionError when it is still running at the deadline."""
    out: list[int] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), f"still counting after {deadline_s:g} s"
    return out[0]


def test_an_8_mib_word_is_counted_in_bounded_time() -> None:
    """The mock's `--fault huge-word`: 8 MiB of random letters, no space. The count is the
    estimate from the first 256 KiB; on such uniform text it is within 2 % of the exact count
    of a 1 MiB prefix scaled up (the exact count of the whole word takes most of a minute)."""
    tokenizer = load_tokenizer(None)
    word = "".join(random.Random(0).choices(string.ascii_letters, k=8 << 20))
    count = _in_thread(lambda: tokenizer.count(f"answer: {word} done"), HUGE_WORD_DEADLINE_S)
    scaled = 8 * len(tokenizer.encode(word[:1 << 20]))
    assert abs(count - scaled) <= 0.02 * scaled, (count, scaled)


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


def test_beyond_the_sample_a_word_is_estimated_from_it() -> None:
    seen: list[int] = []

    def characters(text: str) -> int:
        seen.append(len(text))
        return len(text)

    word = "ab" * (3 * SAMPLE_LIMIT // 2) + "c"
    assert count_bounded(characters, f"x {word} y") == len(word) + 4
    assert sum(seen) == SAMPLE_LIMIT + 4 and max(seen) == WORD_LIMIT
