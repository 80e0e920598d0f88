"""Fixtures: the bundled tokenizer, a tiny Hugging Face tokenizer, and a JSONL writer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from aiperf.dataset.corpus import CORPUS
from aiperf.tokenizer import Tokenizer, load_tokenizer


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return load_tokenizer(None)


@pytest.fixture(scope="session", params=["byte_level", "metaspace"])
def hf_tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A GPT-2-style (byte-level) or Llama-style (metaspace, drops a leading space) tokenizer."""
    tok = HFTokenizer(models.BPE(unk_token="<unk>"))
    if request.param == "byte_level":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        alphabet = []
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>"], initial_alphabet=alphabet)
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    folder = tmp_path_factory.mktemp(request.param)
    tok.save(str(folder / "tokenizer.json"))
    return load_tokenizer(str(folder))


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    """``write_jsonl(name, rows)``: rows are dicts (encoded) or str (written verbatim)."""

    def write(name: str, rows: list[dict[str, Any] | str]) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [row if isinstance(row, str) else orjson.dumps(row).decode() for row in rows]
        path.write_text("\n".join(lines) + "\n")
        return path

    return write
