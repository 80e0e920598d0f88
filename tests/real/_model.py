"""Writes a tiny random-weight llama model as GGUF, with a real vocabulary, for llama-server.

Run as a script with llama.cpp's `gguf-py` on the path (the llama-cpp-python sdist's copy, from
scripts/ci/llama-server.sh's cache; never vendored here):

    PYTHONPATH=<cache>/src/vendor/llama.cpp/gguf-py python tests/real/_model.py \\
        --vocab <cache>/src/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf --out tiny.gguf

The tokenizer keys (`tokenizer.*`) are copied from the vocab-only GGUF; the weights are random
f32 tensors of a 2-block llama with a 64-wide embedding: the server loads it in milliseconds and
generates garbage text at several hundred tokens per second per slot on one core, which is all a
client benchmark needs (requests, streaming, usage, timings, metrics, keep-alive behaviour).
Deterministic for a given `--seed`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

EMBED, BLOCKS, HEADS, HEADS_KV, FFN, CONTEXT = 64, 2, 4, 2, 128, 4096


def _copy_tokenizer(writer: Any, vocab: Path) -> int:
    """Copy every `tokenizer.*` key of `vocab` into `writer`; returns the vocabulary size."""
    import gguf

    reader = gguf.GGUFReader(vocab)
    size = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        value = field.contents()
        if kind == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if name == "tokenizer.ggml.tokens":
                size = len(value)
            writer.add_key_value(name, value, kind, sub_type=sub)
        else:
            writer.add_key_value(name, value, kind)
    if not size:
        raise SystemExit(f"{vocab}: no tokenizer.ggml.tokens")
    return size


def write_model(vocab: Path, out: Path, seed: int = 0) -> None:
    """Write the model to `out` (see the module doc)."""
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(out), arch="llama")
    n_vocab = _copy_tokenizer(writer, vocab)
    writer.add_name("aiperf-tiny-random")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(BLOCKS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS_KV)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    def tensor(name: str, *shape: int) -> None:
        data = rng.normal(0.0, 0.02, size=shape).astype(np.float32) if len(shape) > 1 else np.ones(shape, np.float32)
        writer.add_tensor(name, data)

    kv = EMBED // HEADS * HEADS_KV
    tensor("token_embd.weight", n_vocab, EMBED)
    tensor("output_norm.weight", EMBED)
    tensor("output.weight", n_vocab, EMBED)
    for i in range(BLOCKS):
        tensor(f"blk.{i}.attn_norm.weight", EMBED)
        tensor(f"blk.{i}.attn_q.weight", EMBED, EMBED)
        tensor(f"blk.{i}.attn_k.weight", kv, EMBED)
        tensor(f"blk.{i}.attn_v.weight", kv, EMBED)
        tensor(f"blk.{i}.attn_output.weight", EMBED, EMBED)
        tensor(f"blk.{i}.ffn_norm.weight", EMBED)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, EMBED)
        tensor(f"blk.{i}.ffn_up.weight", FFN, EMBED)
        tensor(f"blk.{i}.ffn_down.weight", EMBED, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=Path, required=True, help="a vocab-only GGUF (models/ggml-vocab-*.gguf)")
    parser.add_argument("--out", type=Path, required=True, help="the model file to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_model(args.vocab, args.out, args.seed)


if __name__ == "__main__":
    main()
