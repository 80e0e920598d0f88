"""`build_conversations`: the dataset-manager's single entry point for building a dataset."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec

from aiperf.config import Dataset, DatasetFormat, FileDataset
from aiperf.dataset.custom import multi_turn, random_pool, single_turn
from aiperf.dataset.errors import DatasetError
from aiperf.dataset.jsonl import first_object
from aiperf.dataset.model import Conversation
from aiperf.dataset.synthetic import synthetic_conversations
from aiperf.dataset.trace import mooncake_trace
from aiperf.tokenizer import Tokenizer

Loader = Callable[[Path, FileDataset, Tokenizer, int | None], list[Conversation]]

LOADERS: dict[DatasetFormat, Loader] = {
    DatasetFormat.SINGLE_TURN: single_turn,
    DatasetFormat.MULTI_TURN: multi_turn,
    DatasetFormat.MOONCAKE_TRACE: mooncake_trace,
    DatasetFormat.RANDOM_POOL: random_pool,
}


def build_conversations(spec: Dataset, tokenizer: Tokenizer, *, seed: int | None) -> list[Conversation]:
    """The conversations of `spec`: synthetic, or read from its file or its inline `records`
    (format detected when unset). Deterministic for a given `seed` (None: not reproducible).
    Conversation ids are unique. Blocks (CPU-bound, reads the file). Raises `DatasetError` (one
    line) for a missing or unreadable file, or a malformed line or record (naming file and line,
    or `records:<n>`)."""
    if not isinstance(spec, FileDataset):
        return synthetic_conversations(spec, tokenizer, seed)
    if spec.path is None:
        return _inline(spec, tokenizer, seed)
    path = Path(spec.path).expanduser()
    if not path.exists():
        raise DatasetError(f"--input-file {spec.path}: no such file or folder")
    conversations = LOADERS[spec.format or detect_type(path)](path, spec, tokenizer, seed)
    _check_unique_ids(path, conversations)
    return conversations


def _inline(spec: FileDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """`spec.records` read as the lines of a file of its format (written to a scratch file)."""
    with tempfile.TemporaryDirectory(prefix="aiperf-records-") as scratch:
        path = Path(scratch) / "records.jsonl"
        path.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in spec.records))
        try:
            conversations = LOADERS[spec.format or detect_type(path)](path, spec, tokenizer, seed)
        except DatasetError as exc:
            raise DatasetError(str(exc).replace(str(path), "records")) from None
    _check_unique_ids(Path("records"), conversations)
    return conversations


def detect_type(path: Path) -> DatasetFormat:
    """Guess the format of ``path``: a folder is random_pool; else by the first line's fields."""
    if path.is_dir():
        return DatasetFormat.RANDOM_POOL
    first = first_object(path)
    if "turns" in first:
        return DatasetFormat.MULTI_TURN
    if "input_length" in first or "hash_ids" in first or "text_input" in first:
        return DatasetFormat.MOONCAKE_TRACE
    return DatasetFormat.SINGLE_TURN


def _check_unique_ids(path: Path, conversations: list[Conversation]) -> None:
    seen: set[str] = set()
    for conversation in conversations:
        if conversation.id in seen:
            raise DatasetError(f"{path}: conversation id {conversation.id!r} is used twice")
        seen.add(conversation.id)
