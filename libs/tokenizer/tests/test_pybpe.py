"""The Python encoder gives tiktoken's ids, and the bundled tokenizer builds tiktoken's
encoding only for long, non-Latin or plentiful text."""

from __future__ import annotations

import random
import unicodedata

import pytest
import tiktoken

from aiperf.tokenizer import BundledTokenizer
from aiperf.tokenizer import bundled as bundled_module
from aiperf.tokenizer.bundled import VARIANTS
from aiperf.tokenizer.pybpe import MAX_MERGE, PyBpe
from aiperf.tokenizer.ranks import default_cache_dir, load_ranks


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def encoders(request: pytest.FixtureRequest) -> tuple[PyBpe, tiktoken.Encoding]:
    spec = VARIANTS[request.param]
    ranks = load_ranks(spec.vocabulary, default_cache_dir())
    special = {token: rank for rank, token in spec.special}
    return (PyBpe(ranks, spec.pattern, special),
            tiktoken.Encoding("q", pat_str=spec.pattern, mergeable_ranks=ranks, special_tokens=special))


def _latin_texts(seed: int, n: int) -> list[str]:
    """Random strings over U+0000-U+024F, whitespace runs, specials, contractions (`'ſ` folds
    to `'s`) and combining marks, half of them NFC-normalised."""
    rng = random.Random(seed)
    pool = ([chr(i) for i in range(0x250)] * 2 + list(" \n\t\r  abcdefghijklmnop") * 60
            + ["<|im_end|>", "<|endoftext|>", "'s", "'ſ", "'S", "'LL", "123", "é", "e\u0301", "'"] * 30)
    texts = []
    for _ in range(n):
        text = "".join(rng.choice(pool) for _ in range(rng.randrange(0, 40)))
        texts.append(unicodedata.normalize("NFC", text) if rng.random() < 0.5 else text)
    return texts


def test_python_encoder_matches_tiktoken(encoders: tuple[PyBpe, tiktoken.Encoding]) -> None:
    from aiperf.dataset.corpus import CORPUS

    py, tk = encoders
    texts = [CORPUS, " ".join(CORPUS.split()), "", "\ud800 lone surrogate", *_latin_texts(1, 4000)]
    declined = 0
    for text in texts:
        ids = tk.encode(text, allowed_special="all", disallowed_special=())
        got = py.encode(text)
        if got is None:  # a piece longer than MAX_MERGE bytes that is no token
            declined += 1
            assert any(len(p.encode()) > MAX_MERGE for p in py._pattern.findall(text)), repr(text)
        else:
            assert got == ids, repr(text)
        assert py.decode_bytes(ids) == tk.decode_bytes(ids)
    assert declined < len(texts) // 20


def test_a_long_unknown_word_is_left_to_tiktoken() -> None:
    tok = BundledTokenizer()
    word = "".join(random.Random(3).choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=4000))
    ids = tok.encode(f"answer: {word} done")
    assert tok._impl is not None
    assert ids == tok._impl.encode(f"answer: {word} done")


def test_short_latin_text_never_builds_tiktoken() -> None:
    tok = BundledTokenizer()
    lazy_ids = [tok.encode(text) for text in _latin_texts(2, 300)]
    assert tok.decode(lazy_ids[5]) is not None
    assert tok._impl is None
    tok.tiktoken_encoding()
    assert [tok.encode(text) for text in _latin_texts(2, 300)] == lazy_ids


@pytest.mark.parametrize("text", ["日本語のテキスト 🚀", "x" * (bundled_module.PY_TEXT_LIMIT + 1)])
def test_long_or_non_latin_text_builds_tiktoken(text: str) -> None:
    tok = BundledTokenizer()
    ids = tok.encode(text)
    assert tok._impl is not None
    assert ids == tok._impl.encode(unicodedata.normalize("NFC", text), allowed_special="all")


def test_budget_switches_to_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundled_module, "PY_BUDGET", 100)
    tok = BundledTokenizer()
    first = tok.encode("a" * 60)
    assert tok._impl is None
    assert tok.encode("b" * 60) == tok.tiktoken_encoding().encode("b" * 60)
    assert tok._impl is not None and tok.encode("a" * 60) == first


def test_decode_of_sparse_ranks_and_unknown_ids() -> None:
    """Ranks that are not 0..n-1 in order decode through a dict; an id that is no token raises."""
    dense = PyBpe({b"a": 0, b"b": 1, b"ab": 2}, r"\w+|\s+", {"<|x|>": 3})
    sparse = PyBpe({b"ab": 7, b"a": 5, b"b": 6}, r"\w+|\s+", {"<|x|>": 9})
    assert dense.encode("ab<|x|>ba") == [2, 3, 1, 0]
    assert dense.decode_bytes([2, 3, 1, 0]) == b"ab<|x|>ba"
    assert sparse.encode("ab<|x|>ba") == [7, 9, 6, 5]
    assert sparse.decode_bytes([7, 9, 6, 5]) == b"ab<|x|>ba"
    for bpe, bad in ((dense, -1), (dense, 4), (sparse, 0)):
        with pytest.raises(KeyError):
            bpe.decode_bytes([bad])


def test_merged_bytes_spend_the_budget_faster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Words that are no token cost ~10x more in Python: they are charged `MERGE_WEIGHT` per byte."""
    monkeypatch.setattr(bundled_module, "PY_BUDGET", 2000)
    tok = BundledTokenizer()
    prose = "the cat sat on the mat " * 4  # every piece a token: charged its length only
    for _ in range(10):
        tok.encode(prose)
    assert tok._impl is None and tok._py.merged_bytes == 0
    rare = " ".join("".join(random.Random(i).choices("qxzjkvw", k=12)) for i in range(8))
    first = tok.encode(rare)  # ~100 merged bytes, ~1,200 of the budget
    assert tok._impl is None and tok._py.merged_bytes > 80
    assert tok.encode(rare) == first
    assert tok._impl is not None
