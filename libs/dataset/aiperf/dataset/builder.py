"""`build_conversations`: the dataset-manager's single entry point for building a dataset."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiperf.dataset.custom import multi_turn, random_pool, single_turn
from aiperf.dataset.errors import DatasetError
from aiperf.dataset.jsonl import first_object
from aiperf.dataset.model import Conversation
from aiperf.dataset.options import DatasetOptions
from aiperf.dataset.synthetic import synthetic_conversations
from aiperf.dataset.trace import mooncake_trace
from aiperf.tokenizer import Tokenizer

Loader = Callable[[Path, DatasetOptions, Tokenizer], list[Conversation]]

LOADERS: dict[str, Loader] = {
    "single_turn": single_turn,
    "multi_turn": multi_turn,
    "mooncake_trace": mooncake_trace,
    "random_pool": random_pool,
}


def build_conversations(options: DatasetOptions, tokenizer: Tokenizer) -> list[Conversation]:
    """The dataset described by ``options``: synthetic without ``--input-file``, else the file's.

    Deterministic for a given ``--random-seed``. Conversation ids are unique. Blocks (CPU-bound,
    reads the file). Raises `DatasetError` (one line) for a missing/unreadable file, a malformed
    line (naming file and line), an unknown type, or ``--custom-dataset-type`` without a file.
    """
    if options.input_file is None:
        if options.custom_dataset_type is not None:
            raise DatasetError(f"--custom-dataset-type {options.custom_dataset_type}: needs --input-file")
        return synthetic_conversations(options, tokenizer)
    path = Path(options.input_file).expanduser()
    if not path.exists():
        raise DatasetError(f"--input-file {options.input_file}: no such file or folder")
    kind = options.custom_dataset_type or detect_type(path)
    loader = LOADERS.get(kind)
    if loader is None:
        raise DatasetError(f"--custom-dataset-type {kind}: unknown; expected one of {', '.join(LOADERS)}")
    conversations = loader(path, options, tokenizer)
    _check_unique_ids(path, conversations)
    return conversations


def detect_type(path: Path) -> str:
    """Guess the dataset type of ``path``: a folder is random_pool; else by the first line's fields."""
    if path.is_dir():
        return "random_pool"
    first = first_object(path)
    if "turns" in first:
        return "multi_turn"
    if "input_length" in first or "hash_ids" in first or "text_input" in first:
        return "mooncake_trace"
    return "single_turn"


def _check_unique_ids(path: Path, conversations: list[Conversation]) -> None:
    seen: set[str] = set()
    for conversation in conversations:
        if conversation.id in seen:
            raise DatasetError(f"{path}: conversation id {conversation.id!r} is used twice")
        seen.add(conversation.id)
