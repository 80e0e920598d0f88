"""Synthetic conversations: corpus prompts with ISL/OSL/turn counts drawn per ``--random-seed``."""

from __future__ import annotations

import numpy as np

from aiperf.config import SyntheticDataset
from aiperf.dataset.media import audio_clip, noise_image
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.prompts import PromptSynthesizer
from aiperf.dataset.sampling import draw_length, sequence_lengths, session_id, turn_delay_ms
from aiperf.tokenizer import Tokenizer


def synthetic_conversations(spec: SyntheticDataset, tokenizer: Tokenizer, seed: int | None) -> list[Conversation]:
    """``spec.entries`` conversations, identical for identical (spec, tokenizer, seed).

    Per conversation: a number of turns drawn from ``turns``; per turn: input tokens and
    max_tokens drawn from ``isl`` and ``osl`` (None when osl is unset), or one pair of the
    ``sequence_distribution``; the delay before a later turn from ``turn_delay``, times
    ``turn_delay_ratio``. With a prefix pool (``prefix_prompts`` pool_size and length both set),
    each first turn starts with one prompt of the pool (its tokens are on top of the ISL draw).
    With ``prompts.batch_size`` above 1 a turn holds that many prompts (``texts``), each its own
    ISL draw (the prefix on the first), ``text`` their join and ``input_tokens`` their sum.
    ``images`` and ``audio`` add that many synthetic images and clips to every turn
    (``aiperf.dataset.media``, from a generator of their own: the texts are the same with or
    without them). CPU-bound: ~0.2 ms per 550-token turn.
    """
    rng = np.random.default_rng(seed)
    media_rng = np.random.default_rng(None if seed is None else [seed, 1])  # text draws stay as without media
    images, audio = spec.images, spec.audio
    synth = PromptSynthesizer.of(tokenizer)
    prefix = spec.prefix_prompts
    prefixes: list[str] = []
    if prefix.pool_size and prefix.length:
        prefixes = [synth.text(prefix.length, rng)[0] for _ in range(prefix.pool_size)]
    conversations = []
    for index in range(spec.entries):
        num_turns = draw_length(rng, spec.turns)
        turns = []
        for position in range(num_turns):
            texts, counts, output_tokens = [], [], None
            for piece in range(spec.prompts.batch_size):
                input_tokens, drawn_osl = sequence_lengths(rng, spec.prompts)
                output_tokens = drawn_osl if piece == 0 else output_tokens
                text, count = synth.text(input_tokens, rng)
                if position == 0 and piece == 0 and prefixes:
                    text = f"{prefixes[int(rng.integers(len(prefixes)))]} {text}"
                    count = tokenizer.count(text)
                texts.append(text)
                counts.append(count)
            turns.append(Turn(
                text="\n".join(texts),
                input_tokens=sum(counts),
                max_tokens=output_tokens,
                delay_ms=turn_delay_ms(rng, spec.turn_delay, spec.turn_delay_ratio) if position else None,
                texts=texts if len(texts) > 1 else [],
                images=[noise_image(media_rng, images) for _ in range(images.batch_size)],
                audios=[audio_clip(media_rng, audio) for _ in range(audio.batch_size)],
            ))
        conversations.append(Conversation(id=session_id(index), turns=turns))
    return conversations
