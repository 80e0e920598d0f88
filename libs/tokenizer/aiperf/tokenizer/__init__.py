"""Offline tokenizers: the bundled Qwen default or a local Hugging Face ``tokenizer.json``.

Nothing is ever downloaded. ``load_tokenizer(None)`` gives the bundled default; a path gives a
Hugging Face tokenizer; anything else raises `TokenizerError`.

Importing the package is cheap: each name is imported from its submodule when first used
(PEP 562), so the `aiperf` command can read `BUILTIN_NAMES` without importing tiktoken or
tokenizers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiperf.tokenizer.bundled import BundledTokenizer
    from aiperf.tokenizer.errors import TokenizerError
    from aiperf.tokenizer.huggingface import HuggingFaceTokenizer
    from aiperf.tokenizer.loader import load_tokenizer
    from aiperf.tokenizer.names import BUILTIN_NAMES
    from aiperf.tokenizer.protocol import Tokenizer

_SUBMODULE = {
    "BUILTIN_NAMES": "names", "BundledTokenizer": "bundled", "HuggingFaceTokenizer": "huggingface",
    "Tokenizer": "protocol", "TokenizerError": "errors", "load_tokenizer": "loader",
}
"""Which submodule defines each public name."""


def __getattr__(name: str) -> Any:
    """The public `name`, imported from its submodule on first use."""
    module = _SUBMODULE.get(name)
    if module is None:
        raise AttributeError(f"module 'aiperf.tokenizer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"aiperf.tokenizer.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "BUILTIN_NAMES", "BundledTokenizer", "HuggingFaceTokenizer", "Tokenizer", "TokenizerError",
    "load_tokenizer",
]
