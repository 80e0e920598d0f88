"""`DatasetOptions`: what to build, with AIPerf 0.13's defaults for the matching ``profile`` flags."""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

from aiperf.dataset.errors import DatasetError

DatasetType = Literal["single_turn", "multi_turn", "mooncake_trace", "random_pool"]
DATASET_TYPES: tuple[str, ...] = get_args(DatasetType)

MOONCAKE_BLOCK_SIZE = 512  # tokens per hash id in mooncake traces (AIPerf's default)


class DatasetOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Dataset flags of ``aiperf profile``; each field names its flag.

    Synthetic prompts are used unless ``input_file`` is set. ``custom_dataset_type`` None with a
    file means: detect from the file (folder -> random_pool; ``turns`` -> multi_turn;
    ``input_length``/``hash_ids`` -> mooncake_trace; otherwise single_turn).
    Construction validates ranges and raises `DatasetError` naming the flag.
    """

    isl: int = 550                                   # --isl / --synthetic-input-tokens-mean
    isl_stddev: float = 0.0                          # --isl-stddev
    osl: int | None = None                           # --osl (None: the server decides)
    osl_stddev: float = 0.0                          # --osl-stddev
    num_dataset_entries: int = 100                   # --num-dataset-entries / --num-prompts
    num_conversations: int | None = None             # --conversation-num (overrides entries)
    conversation_turn_mean: float = 1.0              # --conversation-turn-mean
    conversation_turn_stddev: float = 0.0            # --conversation-turn-stddev
    conversation_turn_delay_mean: float = 0.0        # --conversation-turn-delay-mean (ms)
    conversation_turn_delay_stddev: float = 0.0      # --conversation-turn-delay-stddev (ms)
    input_file: str | None = None                    # --input-file
    custom_dataset_type: DatasetType | None = None   # --custom-dataset-type
    isl_block_size: int | None = None                # --isl-block-size (None: 512 for traces)
    random_seed: int | None = None                   # --random-seed (None: not reproducible)
    num_prefix_prompts: int = 0                      # --num-prefix-prompts
    prefix_prompt_length: int = 0                    # --prefix-prompt-length (tokens)

    def __post_init__(self) -> None:
        checks: list[tuple[bool, str]] = [
            (self.isl >= 1, f"--isl {self.isl}: must be at least 1"),
            (self.isl_stddev >= 0, f"--isl-stddev {self.isl_stddev}: must not be negative"),
            (self.osl is None or self.osl >= 1, f"--osl {self.osl}: must be at least 1"),
            (self.osl_stddev >= 0, f"--osl-stddev {self.osl_stddev}: must not be negative"),
            (self.num_dataset_entries >= 1,
             f"--num-dataset-entries {self.num_dataset_entries}: must be at least 1"),
            (self.num_conversations is None or self.num_conversations >= 1,
             f"--conversation-num {self.num_conversations}: must be at least 1"),
            (self.conversation_turn_mean >= 1,
             f"--conversation-turn-mean {self.conversation_turn_mean}: must be at least 1"),
            (self.conversation_turn_stddev >= 0,
             f"--conversation-turn-stddev {self.conversation_turn_stddev}: must not be negative"),
            (self.conversation_turn_delay_mean >= 0,
             f"--conversation-turn-delay-mean {self.conversation_turn_delay_mean}: must not be negative"),
            (self.conversation_turn_delay_stddev >= 0,
             f"--conversation-turn-delay-stddev {self.conversation_turn_delay_stddev}: must not be negative"),
            (self.custom_dataset_type is None or self.custom_dataset_type in DATASET_TYPES,
             f"--custom-dataset-type {self.custom_dataset_type}: unknown; expected one of "
             f"{', '.join(DATASET_TYPES)}"),
            (self.isl_block_size is None or self.isl_block_size >= 1,
             f"--isl-block-size {self.isl_block_size}: must be at least 1"),
            (self.num_prefix_prompts >= 0, f"--num-prefix-prompts {self.num_prefix_prompts}: must not be negative"),
            (self.prefix_prompt_length >= 0,
             f"--prefix-prompt-length {self.prefix_prompt_length}: must not be negative"),
        ]
        for ok, message in checks:
            if not ok:
                raise DatasetError(message)

    @property
    def conversation_count(self) -> int:
        """How many conversations synthetic and random_pool datasets generate."""
        return self.num_conversations if self.num_conversations is not None else self.num_dataset_entries
