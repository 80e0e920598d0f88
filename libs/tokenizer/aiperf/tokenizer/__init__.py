"""Offline tokenizers: the bundled Qwen default or a local Hugging Face ``tokenizer.json``.

Nothing is ever downloaded. ``load_tokenizer(None)`` gives the bundled default; a path gives a
Hugging Face tokenizer; anything else raises `TokenizerError`.
"""

from aiperf.tokenizer.bundled import BUILTIN_NAMES, BundledTokenizer
from aiperf.tokenizer.errors import TokenizerError
from aiperf.tokenizer.huggingface import HuggingFaceTokenizer
from aiperf.tokenizer.loader import load_tokenizer
from aiperf.tokenizer.protocol import Tokenizer

__all__ = [
    "BUILTIN_NAMES", "BundledTokenizer", "HuggingFaceTokenizer", "Tokenizer", "TokenizerError",
    "load_tokenizer",
]
