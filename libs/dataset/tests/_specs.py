"""Dataset specs for tests, spelled with the `aiperf profile` flag names users know."""

from __future__ import annotations

from aiperf.config import (
    Dataset,
    DatasetFormat,
    Delay,
    FileDataset,
    Length,
    PrefixPrompts,
    Prompts,
    SyntheticDataset,
)


def dataset_spec(*, input_file: str | None = None, custom_dataset_type: str | None = None,
                 isl: float = 550, isl_stddev: float = 0.0, osl: float | None = None, osl_stddev: float = 0.0,
                 isl_block_size: int | None = None, num_dataset_entries: int = 100,
                 conversation_turn_mean: float = 1, conversation_turn_stddev: float = 0.0,
                 conversation_turn_delay_mean: float = 0.0, conversation_turn_delay_stddev: float = 0.0,
                 num_prefix_prompts: int = 0, prefix_prompt_length: int = 0) -> Dataset:
    """The dataset these flags describe (a file dataset when `input_file` is set)."""
    prompts = Prompts(isl=Length(mean=isl, stddev=isl_stddev),
                      osl=Length(mean=osl, stddev=osl_stddev) if osl is not None else None,
                      block_size=isl_block_size)
    if input_file is not None:
        return FileDataset(path=input_file, entries=num_dataset_entries, prompts=prompts,
                           format=DatasetFormat(custom_dataset_type) if custom_dataset_type else None)
    return SyntheticDataset(
        entries=num_dataset_entries, prompts=prompts,
        turns=Length(mean=conversation_turn_mean, stddev=conversation_turn_stddev),
        turn_delay=Delay(mean=conversation_turn_delay_mean, stddev=conversation_turn_delay_stddev),
        prefix_prompts=PrefixPrompts(pool_size=num_prefix_prompts, length=prefix_prompt_length))
