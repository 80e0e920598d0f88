"""``mooncake_trace`` files: timestamped requests whose prompts are rebuilt from hash-id blocks.

Each hash id stands for one block of ``--isl-block-size`` tokens (512 by default). The same id
always yields the same block text, wherever it appears, so requests that share hash-id prefixes
share text prefixes and a server's prefix cache sees the trace's intended hit rate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aiperf.config import FileDataset
from aiperf.dataset.errors import DatasetError
from aiperf.dataset.jsonl import records
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.prompts import PromptSynthesizer
from aiperf.dataset.records import MooncakeRecord
from aiperf.dataset.sampling import max_tokens, session_id
from aiperf.tokenizer import Tokenizer

MOONCAKE_BLOCK_SIZE = 512
"""Tokens per hash id in mooncake traces (AIPerf's default)."""

_U64 = 2**64


class HashBlocks:
    """Token ids of hash-id blocks, generated on first use from ``(base_seed, hash_id)`` and kept.

    `check` enforces what makes a trace consistent (AIPerf rejects the same): a request of
    ``length`` tokens has at most ceil(length / block_size) hash ids, and a hash id always stands
    for a block of the same size (``block_size``, or what is left of the request at the last
    block)."""

    def __init__(self, synth: PromptSynthesizer, block_size: int, base_seed: int) -> None:
        """Blocks of ``block_size`` tokens; ``base_seed`` makes the text differ between seeds."""
        self._synth, self._block_size, self._base_seed = synth, block_size, base_seed
        self._blocks: dict[int, list[int]] = {}
        self._sizes: dict[int, tuple[int, str]] = {}

    def check(self, hash_ids: list[int], length: int, where: str) -> None:
        """Raise `DatasetError` (naming `where`, the rule and the block size) when `hash_ids`
        contradict `length` or an earlier use of one of them."""
        size = self._block_size
        allowed = -(-length // size)
        if len(hash_ids) > allowed:
            raise DatasetError(f"{where}: {len(hash_ids)} hash_ids but input_length {length} holds at most "
                               f"{allowed} blocks of {size} tokens (--isl-block-size {size})")
        for position, hash_id in enumerate(hash_ids):
            tokens = min(size, length - position * size)
            first = self._sizes.setdefault(hash_id, (tokens, where))
            if first[0] != tokens:
                raise DatasetError(f"{where}: hash id {hash_id} is a block of {tokens} tokens here but of "
                                   f"{first[0]} at {first[1]}; one hash id is one block "
                                   f"(--isl-block-size {size})")

    def token_ids(self, hash_ids: list[int], length: int, rng: np.random.Generator) -> list[int]:
        """``length`` ids: the blocks of ``hash_ids`` in order, cut at ``length``; if they are too
        short, the rest is fresh text drawn from ``rng``."""
        out: list[int] = []
        for hash_id in hash_ids:
            if len(out) >= length:
                break
            block = self._blocks.get(hash_id)
            if block is None:
                block_rng = np.random.default_rng([self._base_seed, hash_id % _U64])
                block = self._blocks[hash_id] = self._synth.token_ids(self._block_size, block_rng)
            out += block[:length - len(out)]
        if len(out) < length:
            out += self._synth.token_ids(length - len(out), rng)
        return out


def mooncake_trace(path: Path, spec: FileDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """One conversation per line, or per ``session_id`` (its lines become turns, in file order).

    Turn text is ``text_input`` when given, else ``input_length`` tokens built from ``hash_ids``
    blocks; for built text ``input_tokens`` is ``input_length`` (not re-counted: traces are big,
    and block joins re-tokenize to within a token or two). ``timestamp``/``delay`` are ms.
    Raises `DatasetError` naming the line when neither ``input_length`` nor ``text_input`` is set,
    or when ``hash_ids`` contradict ``input_length`` (see `HashBlocks.check`).
    """
    rng = np.random.default_rng(seed)
    blocks = HashBlocks(PromptSynthesizer.of(tokenizer), spec.prompts.block_size or MOONCAKE_BLOCK_SIZE,
                        base_seed=int(rng.integers(2**63)))
    sessions: dict[str, list[Turn]] = {}
    for number, record in records(path, MooncakeRecord, "mooncake_trace"):
        where = f"{path}:{number}"
        if record.text_input is not None:
            text, count = record.text_input, tokenizer.count(record.text_input)
        elif record.input_length is not None and record.input_length >= 1:
            blocks.check(record.hash_ids, record.input_length, where)
            text = tokenizer.decode(blocks.token_ids(record.hash_ids, record.input_length, rng))
            count = record.input_length
        elif record.input_length is not None:
            raise DatasetError(f"{where}: 'input_length' must be at least 1, got {record.input_length}")
        else:
            raise DatasetError(f"{where}: needs 'input_length' (with optional 'hash_ids') or 'text_input'")
        if record.output_length is not None and record.output_length < 1:
            raise DatasetError(f"{where}: 'output_length' must be at least 1, got {record.output_length}")
        turn = Turn(
            text=text,
            input_tokens=count,
            max_tokens=record.output_length if record.output_length is not None else max_tokens(rng, spec.prompts),
            timestamp_ms=record.timestamp,
            delay_ms=record.delay,
        )
        key = record.session_id if record.session_id is not None else session_id(len(sessions))
        sessions.setdefault(key, []).append(turn)
    if not sessions:
        raise DatasetError(f"{path}: no records (the file is empty)")
    return [Conversation(id=key, turns=turns) for key, turns in sessions.items()]
