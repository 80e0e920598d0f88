"""`load_tokenizer`: resolve a ``--tokenizer`` value to a `Tokenizer`, offline, cached per process."""

from __future__ import annotations

import functools
from pathlib import Path

from aiperf.tokenizer.bundled import BundledTokenizer
from aiperf.tokenizer.errors import TokenizerError
from aiperf.tokenizer.huggingface import HuggingFaceTokenizer
from aiperf.tokenizer.names import BUILTIN_NAMES, DEFAULT_BUILTIN
from aiperf.tokenizer.protocol import Tokenizer

TOKENIZER_FILE = "tokenizer.json"


def load_tokenizer(spec: str | None) -> Tokenizer:
    """Return the tokenizer named by ``spec``; blocks while loading (up to ~0.5 s), then cached.

    - ``None`` or ``"builtin"``: the bundled Qwen 3.6 vocabulary (also ``qwen3.6``, ``qwen2.5``).
    - a path to a Hugging Face ``tokenizer.json``, or to a folder containing one.

    Nothing is downloaded. Raises `TokenizerError` (one line) for anything else, including a
    Hugging Face model id, a missing path or an unreadable tokenizer.json. The same ``spec``
    returns the same instance for the life of the process.
    """
    if spec is None:
        return _load_builtin(DEFAULT_BUILTIN)
    if spec.strip().lower() in BUILTIN_NAMES:
        return _load_builtin(BUILTIN_NAMES[spec.strip().lower()])
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / TOKENIZER_FILE
    if not path.is_file():
        raise TokenizerError(
            f"--tokenizer {spec}: not a tokenizer.json file or a folder containing one; models are "
            f"not downloaded (download it first, or use 'builtin')"
        )
    return _load_file(path.resolve())


@functools.cache
def _load_builtin(variant: str) -> Tokenizer:
    return BundledTokenizer(variant)


@functools.cache
def _load_file(path: Path) -> Tokenizer:
    try:
        return HuggingFaceTokenizer(path)
    except Exception as exc:  # tokenizers raises bare Exception subclasses for bad files
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TokenizerError(f"--tokenizer {path}: cannot load tokenizer.json: {first_line}") from exc
