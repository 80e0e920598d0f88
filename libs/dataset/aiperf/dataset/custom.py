"""User JSONL datasets: ``single_turn``, ``multi_turn`` and ``random_pool`` (AIPerf 0.13 field names)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aiperf.config import FileDataset, Prompts
from aiperf.dataset.errors import DatasetError
from aiperf.dataset.jsonl import records
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.records import MultiTurnRecord, SingleTurnRecord, TextGroup
from aiperf.dataset.sampling import max_tokens, session_id
from aiperf.tokenizer import Tokenizer


def _turn(record: SingleTurnRecord, where: str, tokenizer: Tokenizer, rng: np.random.Generator,
          prompts: Prompts) -> Turn:
    texts = record.all_texts()
    images, audios = record.all_images(), record.all_audios()
    if not texts and not images and not audios:
        raise DatasetError(f"{where}: a turn needs 'text', 'texts', 'image(s)' or 'audio(s)'")
    if record.output_length is not None and record.output_length < 1:
        raise DatasetError(f"{where}: 'output_length' must be at least 1, got {record.output_length}")
    text = "\n".join(texts)
    return Turn(
        text=text,
        input_tokens=tokenizer.count(text),
        max_tokens=record.output_length if record.output_length is not None else max_tokens(rng, prompts),
        timestamp_ms=record.timestamp,
        delay_ms=record.delay,
        texts=texts if len(texts) > 1 else [],
        role=record.role,
        images=images,
        audios=audios,
        extra=record.extra or {},
    )


def single_turn(path: Path, spec: FileDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """One conversation per line; lines sharing a ``session_id`` become turns of one conversation.

    A turn without ``output_length`` gets a ``--osl`` draw (None when ``--osl`` is unset).
    """
    rng = np.random.default_rng(seed)
    sessions: dict[str, list[Turn]] = {}
    for number, record in records(path, SingleTurnRecord, "single_turn"):
        turn = _turn(record, f"{path}:{number}", tokenizer, rng, spec.prompts)
        key = record.session_id if record.session_id is not None else session_id(len(sessions))
        sessions.setdefault(key, []).append(turn)
    return _conversations(path, sessions)


def multi_turn(path: Path, spec: FileDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """One conversation per line (``session_id`` + ``turns``); a repeated ``session_id`` is an error."""
    rng = np.random.default_rng(seed)
    sessions: dict[str, list[Turn]] = {}
    for number, record in records(path, MultiTurnRecord, "multi_turn"):
        where = f"{path}:{number}"
        if not record.turns:
            raise DatasetError(f"{where}: 'turns' is empty")
        key = record.session_id if record.session_id is not None else session_id(len(sessions))
        if key in sessions:
            raise DatasetError(f"{where}: session_id {key!r} appears twice")
        sessions[key] = [_turn(t, where, tokenizer, rng, spec.prompts) for t in record.turns]
    return _conversations(path, sessions)


def random_pool(path: Path, spec: FileDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """``spec.entries`` (``--num-dataset-entries``) single-turn conversations.

    ``path`` is one pool file or a folder whose files (sorted by name, dot-files skipped) are
    pools. Each conversation draws one line from every pool, with replacement, and merges them
    into one turn: texts, images and audios concatenated in pool order, scalar fields from the
    last pool that sets them.
    """
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")) \
        if path.is_dir() else [path]
    if not files:
        raise DatasetError(f"{path}: random_pool folder has no files")
    pools = []
    for file in files:
        pool = [record for _, record in records(file, SingleTurnRecord, "random_pool")]
        if not pool:
            raise DatasetError(f"{file}: random_pool file has no records")
        pools.append(pool)
    rng = np.random.default_rng(seed)
    conversations = []
    for index in range(spec.entries):
        picked = [pool[int(rng.integers(len(pool)))] for pool in pools]
        merged = _merge(picked)
        turn = _turn(merged, f"{path} (pool entry {index})", tokenizer, rng, spec.prompts)
        conversations.append(Conversation(id=session_id(index), turns=[turn]))
    return conversations


def _merge(picked: list[SingleTurnRecord]) -> SingleTurnRecord:
    texts: list[str | TextGroup] = []
    merged = SingleTurnRecord(texts=texts, images=[], audios=[], extra={})
    for record in picked:
        texts += record.all_texts()
        merged.images = (merged.images or []) + record.all_images()
        merged.audios = (merged.audios or []) + record.all_audios()
        merged.extra = {**(merged.extra or {}), **(record.extra or {})}
        for field in ("timestamp", "delay", "role", "output_length"):
            if getattr(record, field) is not None:
                setattr(merged, field, getattr(record, field))
    return merged


def _conversations(path: Path, sessions: dict[str, list[Turn]]) -> list[Conversation]:
    if not sessions:
        raise DatasetError(f"{path}: no records (the file is empty)")
    return [Conversation(id=key, turns=turns) for key, turns in sessions.items()]
