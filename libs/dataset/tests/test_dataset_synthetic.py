"""Synthetic datasets: AIPerf defaults, determinism per seed, ISL/OSL distributions, speed."""

from __future__ import annotations

import statistics
import time

import msgspec
import numpy as np
import pytest

from aiperf.dataset import DatasetError, DatasetOptions, PromptSynthesizer, build_conversations
from aiperf.tokenizer import Tokenizer


def test_defaults_match_aiperf() -> None:
    options = DatasetOptions()
    assert (options.isl, options.isl_stddev, options.osl, options.osl_stddev) == (550, 0.0, None, 0.0)
    assert options.num_dataset_entries == 100 and options.conversation_count == 100
    assert (options.conversation_turn_mean, options.conversation_turn_stddev) == (1.0, 0.0)
    assert options.random_seed is None and options.input_file is None


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"isl": 0}, "--isl"), ({"osl": 0}, "--osl"), ({"isl_stddev": -1}, "--isl-stddev"),
    ({"num_dataset_entries": 0}, "--num-dataset-entries"), ({"num_conversations": 0}, "--conversation-num"),
    ({"conversation_turn_mean": 0.5}, "--conversation-turn-mean"),
    ({"custom_dataset_type": "sharegpt"}, "--custom-dataset-type"),
])
def test_invalid_options_name_the_flag(kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(DatasetError, match=f"^{flag} "):
        DatasetOptions(**kwargs)  # type: ignore[arg-type]


def test_same_seed_same_dataset_and_different_seed_differs(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_dataset_entries=20, random_seed=7, isl=100, isl_stddev=20, osl=50,
                             osl_stddev=10, conversation_turn_mean=2, conversation_turn_stddev=1)
    first = build_conversations(options, tokenizer)
    assert build_conversations(options, tokenizer) == first
    other = build_conversations(msgspec.structs.replace(options, random_seed=8), tokenizer)
    assert other != first
    assert [t.text for c in other for t in c.turns][:5] != [t.text for c in first for t in c.turns][:5]


def test_no_seed_is_not_reproducible(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_dataset_entries=5, isl=50)
    assert build_conversations(options, tokenizer) != build_conversations(options, tokenizer)


def test_fixed_isl_is_exact_and_ids_follow_aiperf(tokenizer: Tokenizer) -> None:
    conversations = build_conversations(DatasetOptions(num_dataset_entries=50, random_seed=1), tokenizer)
    assert [c.id for c in conversations[:2]] == ["session_000000", "session_000001"]
    for conversation in conversations:
        (turn,) = conversation.turns
        assert turn.input_tokens == 550 == tokenizer.count(turn.text)
        assert turn.max_tokens is None and turn.delay_ms is None and turn.timestamp_ms is None
        assert turn.text == turn.text.strip()
    assert len({c.turns[0].text for c in conversations}) == 50


def test_isl_osl_distributions(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_dataset_entries=2000, random_seed=3, isl=200, isl_stddev=40, osl=300,
                             osl_stddev=60)
    turns = [c.turns[0] for c in build_conversations(options, tokenizer)]
    isl = [t.input_tokens for t in turns]
    osl = [t.max_tokens for t in turns if t.max_tokens is not None]
    assert len(osl) == 2000
    assert abs(statistics.fmean(isl) - 200) < 4 and abs(statistics.stdev(isl) - 40) < 4
    assert abs(statistics.fmean(osl) - 300) < 6 and abs(statistics.stdev(osl) - 60) < 6
    assert all(t.input_tokens == tokenizer.count(t.text) for t in turns[:200])
    assert min(isl) >= 1 and min(osl) >= 1


def test_lengths_are_clipped_at_one(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_dataset_entries=300, random_seed=0, isl=2, isl_stddev=5, osl=2, osl_stddev=5)
    turns = [c.turns[0] for c in build_conversations(options, tokenizer)]
    assert min(t.input_tokens for t in turns) >= 1
    assert min(t.max_tokens or 0 for t in turns) >= 1


def test_multi_turn_counts_and_delays(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_conversations=400, random_seed=5, isl=20, conversation_turn_mean=3,
                             conversation_turn_stddev=1, conversation_turn_delay_mean=500,
                             conversation_turn_delay_stddev=100)
    conversations = build_conversations(options, tokenizer)
    assert len(conversations) == 400
    assert abs(statistics.fmean(len(c.turns) for c in conversations) - 3) < 0.2
    assert all(c.turns[0].delay_ms is None for c in conversations)
    delays = [t.delay_ms for c in conversations for t in c.turns[1:]]
    assert all(d is not None and d >= 0 for d in delays)
    assert abs(statistics.fmean(d for d in delays if d is not None) - 500) < 20


def test_prefix_prompts_come_from_a_shared_pool(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_dataset_entries=40, random_seed=2, isl=30, num_prefix_prompts=3,
                             prefix_prompt_length=64)
    conversations = build_conversations(options, tokenizer)
    heads = {tokenizer.decode(tokenizer.encode(c.turns[0].text)[:60]) for c in conversations}
    assert len(heads) <= 3
    assert all(80 <= c.turns[0].input_tokens <= 100 for c in conversations)


def test_works_with_a_hugging_face_tokenizer(hf_tokenizer: Tokenizer) -> None:
    conversations = build_conversations(DatasetOptions(num_dataset_entries=30, random_seed=1, isl=120),
                                        hf_tokenizer)
    counts = [c.turns[0].input_tokens for c in conversations]
    assert all(abs(n - 120) <= 2 for n in counts)
    assert all(c.turns[0].input_tokens == hf_tokenizer.count(c.turns[0].text) for c in conversations)
    assert len({c.turns[0].text[:30] for c in conversations}) > 25  # slices start all over the corpus


def test_token_ids_has_exact_length(tokenizer: Tokenizer) -> None:
    synth = PromptSynthesizer.of(tokenizer)
    rng = np.random.default_rng(0)
    assert [len(synth.token_ids(n, rng)) for n in (0, 1, 47, 5000)] == [0, 1, 47, 5000]
    assert PromptSynthesizer.of(tokenizer) is synth


def test_thousand_prompts_of_550_tokens_is_fast(tokenizer: Tokenizer) -> None:
    options = DatasetOptions(num_dataset_entries=1000, random_seed=11, osl=128)
    build_conversations(DatasetOptions(num_dataset_entries=1, random_seed=1), tokenizer)  # warm caches
    start = time.perf_counter()
    conversations = build_conversations(options, tokenizer)
    elapsed = time.perf_counter() - start
    assert len(conversations) == 1000
    assert elapsed < 3.0, elapsed  # ~0.25 s on the dev box; loose for slow CI
