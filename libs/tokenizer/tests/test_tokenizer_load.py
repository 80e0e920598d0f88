"""`load_tokenizer`: bundled default, local tokenizer.json, and one-line errors for the rest."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aiperf.tokenizer import BundledTokenizer, HuggingFaceTokenizer, Tokenizer, TokenizerError, load_tokenizer

TEXTS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.\n\nSecond paragraph\twith a tab.",
    "héllo wörld, naïve café — 日本語のテキスト 🚀",
    "<|im_start|>user\nhi<|im_end|>",
]


def test_default_is_bundled_and_cached() -> None:
    tok = load_tokenizer(None)
    assert isinstance(tok, BundledTokenizer)
    assert isinstance(tok, Tokenizer)
    assert tok.name == "builtin:qwen3.6"
    assert load_tokenizer(None) is tok
    assert load_tokenizer("builtin") is tok
    assert load_tokenizer("qwen2.5").name == "builtin:qwen2.5"


@pytest.mark.parametrize("text", TEXTS)
def test_bundled_round_trip_and_count(text: str) -> None:
    tok = load_tokenizer(None)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.count(text) == len(ids)


def test_bundled_known_counts() -> None:
    tok = load_tokenizer(None)
    assert tok.count("Hello, world!") == 4
    assert tok.count("<|im_end|>") == 1  # special tokens in text are one token
    assert tok.count("word " * 100) == 101  # "word" + 99 x " word" + trailing " "


def test_bundled_count_is_fast() -> None:
    tok = load_tokenizer(None)
    text = "The quick brown fox jumps over the lazy dog. " * 60  # ~600 tokens
    start = time.perf_counter()
    for _ in range(200):
        tok.count(text)
    per_call = (time.perf_counter() - start) / 200
    assert per_call < 0.005, per_call  # typically ~0.1 ms


@pytest.mark.parametrize("text", TEXTS)
def test_hf_round_trip_and_count(hf_tokenizer_dir: Path, text: str) -> None:
    tok = load_tokenizer(str(hf_tokenizer_dir / "tokenizer.json"))
    assert isinstance(tok, HuggingFaceTokenizer)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.count(text) == len(ids)


def test_hf_folder_and_file_give_same_instance(hf_tokenizer_dir: Path) -> None:
    by_dir = load_tokenizer(str(hf_tokenizer_dir))
    by_file = load_tokenizer(str(hf_tokenizer_dir / "tokenizer.json"))
    assert by_dir is by_file
    assert by_dir.name == str((hf_tokenizer_dir / "tokenizer.json").resolve())


def test_hf_special_tokens_kept_and_not_added(hf_tokenizer_dir: Path) -> None:
    tok = load_tokenizer(str(hf_tokenizer_dir))
    ids = tok.encode("fox<|end|>")
    assert tok.decode(ids) == "fox<|end|>"
    assert tok.count("") == 0


@pytest.mark.parametrize("spec", ["Qwen/Qwen3-8B", "gpt2", "/no/such/tokenizer.json", "builtin-x"])
def test_unknown_spec_is_one_line_error(spec: str) -> None:
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(spec)
    message = str(err.value)
    assert "\n" not in message
    assert spec in message
    assert "not downloaded" in message


def test_folder_without_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="not a tokenizer.json file or a folder containing one"):
        load_tokenizer(str(tmp_path))


def test_corrupt_tokenizer_json(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(str(bad))
    assert "cannot load tokenizer.json" in str(err.value)
    assert "\n" not in str(err.value)
