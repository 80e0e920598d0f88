"""Synthetic datasets: AIPerf defaults, determinism per seed, ISL/OSL distributions, speed."""

from __future__ import annotations

import statistics

import numpy as np

from aiperf.config import Length, Prompts, SyntheticDataset
from aiperf.dataset import PromptSynthesizer, build_conversations
from aiperf.tokenizer import Tokenizer
from tests._specs import dataset_spec


def test_defaults_match_aiperf() -> None:
    spec = SyntheticDataset()
    assert (spec.prompts.isl.mean, spec.prompts.isl.stddev, spec.prompts.osl) == (550, 0.0, None)
    assert spec.entries == 100 and (spec.turns.mean, spec.turns.stddev) == (1, 0.0)
    assert spec.random_seed is None


def test_same_seed_same_dataset_and_different_seed_differs(tokenizer: Tokenizer) -> None:
    spec, seed = (dataset_spec(num_dataset_entries=20, isl=100, isl_stddev=20, osl=50,
                             osl_stddev=10, conversation_turn_mean=2, conversation_turn_stddev=1), 7)
    first = build_conversations(spec, tokenizer, seed=seed)
    assert build_conversations(spec, tokenizer, seed=seed) == first
    other = build_conversations(spec, tokenizer, seed=8)
    assert other != first
    assert [t.text for c in other for t in c.turns][:5] != [t.text for c in first for t in c.turns][:5]


def test_no_seed_is_not_reproducible(tokenizer: Tokenizer) -> None:
    spec, seed = (dataset_spec(num_dataset_entries=5, isl=50), None)
    assert build_conversations(spec, tokenizer, seed=seed) != build_conversations(spec, tokenizer, seed=seed)


def test_fixed_isl_is_exact_and_ids_follow_aiperf(tokenizer: Tokenizer) -> None:
    conversations = build_conversations(dataset_spec(num_dataset_entries=50), tokenizer, seed=1)
    assert [c.id for c in conversations[:2]] == ["session_000000", "session_000001"]
    for conversation in conversations:
        (turn,) = conversation.turns
        assert turn.input_tokens == 550 == tokenizer.count(turn.text)
        assert turn.max_tokens is None and turn.delay_ms is None and turn.timestamp_ms is None
        assert turn.text == turn.text.strip()
    assert len({c.turns[0].text for c in conversations}) == 50


def test_isl_osl_distributions(tokenizer: Tokenizer) -> None:
    spec, seed = (dataset_spec(num_dataset_entries=2000, isl=200, isl_stddev=40, osl=300,
                             osl_stddev=60), 3)
    turns = [c.turns[0] for c in build_conversations(spec, tokenizer, seed=seed)]
    isl = [t.input_tokens for t in turns]
    osl = [t.max_tokens for t in turns if t.max_tokens is not None]
    assert len(osl) == 2000
    assert abs(statistics.fmean(isl) - 200) < 4 and abs(statistics.stdev(isl) - 40) < 4
    assert abs(statistics.fmean(osl) - 300) < 6 and abs(statistics.stdev(osl) - 60) < 6
    assert all(t.input_tokens == tokenizer.count(t.text) for t in turns[:200])
    assert min(isl) >= 1 and min(osl) >= 1


def test_lengths_are_clipped_at_one(tokenizer: Tokenizer) -> None:
    spec, seed = (dataset_spec(num_dataset_entries=300, isl=2, isl_stddev=5, osl=2, osl_stddev=5), 0)
    turns = [c.turns[0] for c in build_conversations(spec, tokenizer, seed=seed)]
    assert min(t.input_tokens for t in turns) >= 1
    assert min(t.max_tokens or 0 for t in turns) >= 1


def test_multi_turn_counts_and_delays(tokenizer: Tokenizer) -> None:
    spec, seed = (dataset_spec(num_dataset_entries=400, isl=20, conversation_turn_mean=3,
                             conversation_turn_stddev=1, conversation_turn_delay_mean=500,
                             conversation_turn_delay_stddev=100), 5)
    conversations = build_conversations(spec, tokenizer, seed=seed)
    assert len(conversations) == 400
    assert abs(statistics.fmean(len(c.turns) for c in conversations) - 3) < 0.2
    assert all(c.turns[0].delay_ms is None for c in conversations)
    delays = [t.delay_ms for c in conversations for t in c.turns[1:]]
    assert all(d is not None and d >= 0 for d in delays)
    assert abs(statistics.fmean(d for d in delays if d is not None) - 500) < 20


def test_prefix_prompts_come_from_a_shared_pool(tokenizer: Tokenizer) -> None:
    spec, seed = (dataset_spec(num_dataset_entries=40, isl=30, num_prefix_prompts=3,
                             prefix_prompt_length=64), 2)
    conversations = build_conversations(spec, tokenizer, seed=seed)
    heads = {tokenizer.decode(tokenizer.encode(c.turns[0].text)[:60]) for c in conversations}
    assert len(heads) <= 3
    assert all(80 <= c.turns[0].input_tokens <= 100 for c in conversations)


def test_works_with_a_hugging_face_tokenizer(hf_tokenizer: Tokenizer) -> None:
    conversations = build_conversations(dataset_spec(num_dataset_entries=30, isl=120), hf_tokenizer, seed=1)
    counts = [c.turns[0].input_tokens for c in conversations]
    assert all(abs(n - 120) <= 2 for n in counts)
    assert all(c.turns[0].input_tokens == hf_tokenizer.count(c.turns[0].text) for c in conversations)
    assert len({c.turns[0].text[:30] for c in conversations}) > 25  # slices start all over the corpus


def test_token_ids_has_exact_length(tokenizer: Tokenizer) -> None:
    synth = PromptSynthesizer.of(tokenizer)
    rng = np.random.default_rng(0)
    assert [len(synth.token_ids(n, rng)) for n in (0, 1, 47, 5000)] == [0, 1, 47, 5000]
    assert PromptSynthesizer.of(tokenizer) is synth


def test_a_thousand_prompts_are_built(tokenizer: Tokenizer) -> None:
    # How fast is measured by scripts/bench, not here (a timed test fails on a busy machine).
    conversations = build_conversations(dataset_spec(num_dataset_entries=1000, osl=128), tokenizer, seed=11)
    assert len(conversations) == 1000


def test_a_prompt_batch_puts_that_many_prompts_in_each_turn(tokenizer: Tokenizer) -> None:
    spec = SyntheticDataset(entries=4, prompts=Prompts(isl=Length(mean=20), batch_size=3))
    for conversation in build_conversations(spec, tokenizer, seed=3):
        (turn,) = conversation.turns
        assert len(turn.texts) == 3 and turn.text == "\n".join(turn.texts)
        assert turn.input_tokens == sum(tokenizer.count(t) for t in turn.texts)
        assert all(tokenizer.count(t) == 20 for t in turn.texts)
    single = build_conversations(SyntheticDataset(entries=4, prompts=Prompts(isl=Length(mean=20))), tokenizer, seed=3)
    assert all(not t.texts for c in single for t in c.turns)


def test_synthetic_images_and_audio_go_with_every_turn(tokenizer: Tokenizer) -> None:
    import base64
    import io
    import wave

    from aiperf.config import Audio, Images
    from aiperf.config.benchmark import Seconds

    spec = SyntheticDataset(entries=2, prompts=Prompts(isl=Length(mean=10)),
                            images=Images(batch_size=2, width=Length(mean=16), height=Length(mean=8), format="png"),
                            audio=Audio(batch_size=1, length=Seconds(mean=0.5), sample_rates=[8.0]))
    conversations = build_conversations(spec, tokenizer, seed=5)
    assert conversations == build_conversations(spec, tokenizer, seed=5)
    plain = build_conversations(SyntheticDataset(entries=2, prompts=Prompts(isl=Length(mean=10))), tokenizer, seed=5)
    assert [t.text for c in conversations for t in c.turns] == [t.text for c in plain for t in c.turns]
    for conversation in conversations:
        (turn,) = conversation.turns
        assert len(turn.images) == 2 and all(i.startswith("data:image/png;base64,iVBOR") for i in turn.images)
        (clip,) = turn.audios
        fmt, _, data = clip.partition(",")
        with wave.open(io.BytesIO(base64.b64decode(data))) as wav:
            assert (fmt, wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) == ("wav", 8000, 2, 1)
            assert wav.getnframes() == 4000
    jpeg = Images(batch_size=1, width=Length(mean=4), height=Length(mean=4))
    (conversation,) = build_conversations(SyntheticDataset(entries=1, images=jpeg), tokenizer, seed=1)
    assert base64.b64decode(conversation.turns[0].images[0].split(",", 1)[1])[:2] == b"\xff\xd8"


def test_prompts_do_not_depend_on_which_encoder_ran() -> None:
    """The bundled tokenizer encodes short Latin text in Python until tiktoken's encoding is
    built: prompts are identical either way."""
    from aiperf.tokenizer import BundledTokenizer

    spec = dataset_spec(num_dataset_entries=30, isl=128, isl_stddev=40, osl=64, num_prefix_prompts=2,
                        prefix_prompt_length=50, conversation_turn_mean=2)
    lazy = BundledTokenizer()
    built = BundledTokenizer()
    built.tiktoken_encoding()
    assert build_conversations(spec, lazy, seed=11) == build_conversations(spec, built, seed=11)
    assert lazy._impl is None
