"""Synthetic conversations: corpus prompts with ISL/OSL/turn counts drawn per ``--random-seed``."""

from __future__ import annotations

import numpy as np

from aiperf.config import SyntheticDataset
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.prompts import PromptSynthesizer
from aiperf.dataset.sampling import max_tokens, positive_int, session_id, turn_delay_ms
from aiperf.tokenizer import Tokenizer


def synthetic_conversations(spec: SyntheticDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """``spec.entries`` conversations, identical for identical (spec, tokenizer, seed).

    Per conversation: turns ~ Normal(turns.mean, stddev) >= 1; per turn: input tokens ~
    Normal(isl) >= 1, max_tokens ~ Normal(osl) >= 1 when osl is set, delay before later turns
    from ``turn_delay``. With a prefix pool (``prefix_prompts`` pool_size and length both set),
    each first turn starts with one prompt of the pool (its tokens are on top of the ISL draw).
    CPU-bound: ~0.2 ms per 550-token turn.
    """
    rng = np.random.default_rng(seed)
    synth = PromptSynthesizer.of(tokenizer)
    prefix = spec.prefix_prompts
    prefixes: list[str] = []
    if prefix.pool_size and prefix.length:
        prefixes = [synth.text(prefix.length, rng)[0] for _ in range(prefix.pool_size)]
    isl = spec.prompts.isl
    conversations = []
    for index in range(spec.entries):
        num_turns = positive_int(rng, spec.turns.mean, spec.turns.stddev)
        turns = []
        for position in range(num_turns):
            text, count = synth.text(positive_int(rng, isl.mean, isl.stddev), rng)
            if position == 0 and prefixes:
                text = f"{prefixes[int(rng.integers(len(prefixes)))]} {text}"
                count = tokenizer.count(text)
            turns.append(Turn(
                text=text,
                input_tokens=count,
                max_tokens=max_tokens(rng, spec.prompts),
                delay_ms=turn_delay_ms(rng, spec.turn_delay) if position else None,
            ))
        conversations.append(Conversation(id=session_id(index), turns=turns))
    return conversations
