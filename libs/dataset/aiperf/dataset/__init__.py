"""Datasets: build conversations (synthetic or from user files), store them for many readers.

The dataset-manager calls `build_conversations`, `write_dataset` and `write_inputs_json`;
workers open a `DatasetReader`; the timing-manager reads `DatasetReader.timestamps`; a remote
worker group calls `decompress_dataset` on the downloaded ``.zst`` files.
"""

from aiperf.dataset.builder import LOADERS, build_conversations, detect_type
from aiperf.dataset.errors import DatasetError
from aiperf.dataset.inputs import INPUTS_FILE, PayloadOf, write_inputs_json
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.options import DATASET_TYPES, MOONCAKE_BLOCK_SIZE, DatasetOptions, DatasetType
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

__all__ = [
    "DATASET_TYPES", "DATA_FILE", "INDEX_FILE", "INPUTS_FILE", "LOADERS", "MOONCAKE_BLOCK_SIZE",
    "ZST_SUFFIX", "Conversation", "DatasetError", "DatasetFiles", "DatasetOptions", "DatasetReader",
    "DatasetType", "PayloadOf", "PromptSynthesizer", "Turn", "build_conversations",
    "decompress_dataset", "decompress_file", "detect_type", "write_dataset", "write_inputs_json",
]
