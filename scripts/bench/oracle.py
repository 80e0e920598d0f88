"""NVIDIA AIPerf 0.13.0 for the side-by-side benchmarks, and what it needs to run offline.

`aiperf_bin()` is the `bin` folder of the venv `scripts/ci/aiperf-oracle.sh` installs once (and
caches under ~/.cache/aiperf-oracle); `aiperf_tokenizer(bin)` a small Hugging Face tokenizer
folder (BPE trained on generated text: AIPerf cannot download one here); `aiperf_flags(tok)`
the flags every AIPerf run of ours adds (that tokenizer, no UI, no server-metrics or GPU probes).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("AIPERF_BENCH_CACHE", Path.home() / ".cache" / "aiperf-bench"))

TOKENIZER_SCRIPT = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
from transformers import PreTrainedTokenizerFast
words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
         "benchmark latency tokens streaming server client request response model").split()
text = [" ".join(words[(i * 7 + j) % len(words)] for j in range(40)) for i in range(2000)]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>"],
                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>").save_pretrained(sys.argv[1])
"""


def aiperf_bin() -> Path:
    """The `bin` folder of the AIPerf 0.13.0 venv (installed on first use: ~2-4 min);
    raises `subprocess.CalledProcessError` when it cannot be installed."""
    out = subprocess.run([str(REPO / "scripts/ci/aiperf-oracle.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1]) / "bin"


def aiperf_tokenizer(bin_dir: Path) -> Path:
    """A local Hugging Face tokenizer folder AIPerf can load (made once, cached)."""
    folder = CACHE / "bench-tokenizer"
    if not (folder / "tokenizer.json").exists():
        subprocess.run([str(bin_dir / "python"), "-c", TOKENIZER_SCRIPT, str(folder)], check=True,
                       env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    return folder


def aiperf_flags(tokenizer: Path) -> list[str]:
    """What every AIPerf run here adds: the local tokenizer, no UI, no probes of a server's
    Prometheus endpoint or of GPUs (neither exists here)."""
    return ["--tokenizer", str(tokenizer), "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"]


def aiperf_env() -> dict[str, str]:
    """The environment AIPerf runs in: ours without PYTHONPATH (its package is also `aiperf`)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
