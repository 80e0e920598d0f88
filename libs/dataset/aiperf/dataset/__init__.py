"""Datasets: build conversations (synthetic or from user files), store them for many readers.

The dataset-manager calls `build_conversations`, `write_dataset` and `write_inputs_json`;
workers open a `DatasetReader`; the timing-manager reads `DatasetReader.timestamps`; a remote
worker group calls `decompress_dataset` on the downloaded ``.zst`` files.

Names are imported on first use (PEP 562): a worker or the timing-manager that only reads a
dataset does not pay for numpy and the prompt builders at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # also what tells Pants and mypy about the submodules
    from aiperf.dataset.builder import LOADERS, build_conversations, detect_type
    from aiperf.dataset.errors import DatasetError
    from aiperf.dataset.inputs import INPUTS_FILE, PayloadOf, write_inputs_json
    from aiperf.dataset.model import Conversation, Turn
    from aiperf.dataset.model_selection import assign_models
    from aiperf.dataset.prompts import PromptSynthesizer
    from aiperf.dataset.store import (
        DATA_FILE,
        INDEX_FILE,
        ZST_SUFFIX,
        DatasetFiles,
        DatasetReader,
        decompress_dataset,
        decompress_file,
        write_dataset,
    )
    from aiperf.dataset.trace import MOONCAKE_BLOCK_SIZE

_LAZY = {
    "Conversation": "aiperf.dataset.model",
    "DATA_FILE": "aiperf.dataset.store",
    "DatasetError": "aiperf.dataset.errors",
    "DatasetFiles": "aiperf.dataset.store",
    "DatasetReader": "aiperf.dataset.store",
    "INDEX_FILE": "aiperf.dataset.store",
    "INPUTS_FILE": "aiperf.dataset.inputs",
    "LOADERS": "aiperf.dataset.builder",
    "MOONCAKE_BLOCK_SIZE": "aiperf.dataset.trace",
    "PayloadOf": "aiperf.dataset.inputs",
    "PromptSynthesizer": "aiperf.dataset.prompts",
    "Turn": "aiperf.dataset.model",
    "ZST_SUFFIX": "aiperf.dataset.store",
    "assign_models": "aiperf.dataset.model_selection",
    "build_conversations": "aiperf.dataset.builder",
    "decompress_dataset": "aiperf.dataset.store",
    "decompress_file": "aiperf.dataset.store",
    "detect_type": "aiperf.dataset.builder",
    "write_dataset": "aiperf.dataset.store",
    "write_inputs_json": "aiperf.dataset.inputs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aiperf.dataset' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DATA_FILE", "INDEX_FILE", "INPUTS_FILE", "LOADERS", "MOONCAKE_BLOCK_SIZE",
    "ZST_SUFFIX", "Conversation", "DatasetError", "DatasetFiles", "DatasetReader", "PayloadOf", "PromptSynthesizer", "Turn", "assign_models",
    "build_conversations",
    "decompress_dataset", "decompress_file", "detect_type", "write_dataset", "write_inputs_json",
]
