"""Synthetic conversations: corpus prompts with ISL/OSL/turn counts drawn per ``--random-seed``."""

from __future__ import annotations

import numpy as np

from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.options import DatasetOptions
from aiperf.dataset.prompts import PromptSynthesizer
from aiperf.dataset.sampling import max_tokens, positive_int, session_id, turn_delay_ms
from aiperf.tokenizer import Tokenizer


def synthetic_conversations(options: DatasetOptions, tokenizer: Tokenizer) -> list[Conversation]:
    """``options.conversation_count`` conversations, identical for identical (options, tokenizer).

    Per conversation: turns ~ Normal(turn mean, stddev) >= 1; per turn: input tokens ~
    Normal(isl, isl_stddev) >= 1, max_tokens ~ Normal(osl, osl_stddev) >= 1 when ``--osl`` is set,
    delay before later turns from the turn-delay flags. With ``--num-prefix-prompts`` and
    ``--prefix-prompt-length`` both set, each first turn starts with one prompt of a shared pool
    (its tokens are on top of the ISL draw). CPU-bound: ~0.2 ms per 550-token turn.
    """
    rng = np.random.default_rng(options.random_seed)
    synth = PromptSynthesizer.of(tokenizer)
    prefixes: list[str] = []
    if options.num_prefix_prompts and options.prefix_prompt_length:
        prefixes = [synth.text(options.prefix_prompt_length, rng)[0] for _ in range(options.num_prefix_prompts)]
    conversations = []
    for index in range(options.conversation_count):
        num_turns = positive_int(rng, options.conversation_turn_mean, options.conversation_turn_stddev)
        turns = []
        for position in range(num_turns):
            text, count = synth.text(positive_int(rng, options.isl, options.isl_stddev), rng)
            if position == 0 and prefixes:
                text = f"{prefixes[int(rng.integers(len(prefixes)))]} {text}"
                count = tokenizer.count(text)
            turns.append(Turn(
                text=text,
                input_tokens=count,
                max_tokens=max_tokens(rng, options),
                delay_ms=turn_delay_ms(rng, options) if position else None,
            ))
        conversations.append(Conversation(id=session_id(index), turns=turns))
    return conversations
