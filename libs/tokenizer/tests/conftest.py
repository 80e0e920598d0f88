"""Fixtures: a tiny Hugging Face tokenizer.json trained in a temp dir (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A benchmark measures latency and throughput of an inference server.",
    "héllo wörld, naïve café 123 456",
] * 20


@pytest.fixture(scope="session")
def hf_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<|end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer=trainer)
    folder = tmp_path_factory.mktemp("hf")
    tok.save(str(folder / "tokenizer.json"))
    return folder
