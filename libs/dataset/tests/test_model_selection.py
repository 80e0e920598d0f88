"""Which model each turn goes to when a benchmark names several (`aiperf.dataset.model_selection`)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import pytest

from aiperf.dataset import Conversation, Turn, assign_models
from aiperf.dataset.model_selection import model_sequence


def _conversations(*turns: int) -> list[Conversation]:
    return [Conversation(id=f"c{i}", turns=[Turn(text=f"t{i}.{j}", input_tokens=1) for j in range(n)])
            for i, n in enumerate(turns)]


def _models(conversations: list[Conversation]) -> list[str | None]:
    return [t.model for c in conversations for t in c.turns]


def test_round_robin_counts_turns_over_the_whole_dataset_in_order() -> None:
    out = assign_models(_conversations(2, 1, 3), ["a", "b", "c"])
    assert _models(out) == ["a", "b", "c", "a", "b", "c"]
    assert [t.text for c in out for t in c.turns] == ["t0.0", "t0.1", "t1.0", "t2.0", "t2.1", "t2.2"]


def test_one_model_leaves_the_dataset_as_it_was() -> None:
    conversations = _conversations(2, 2)
    assert assign_models(conversations, ["only"], strategy="random", seed=1) == conversations
    assert _models(assign_models(conversations, ["only"])) == [None] * 4


def test_a_turn_that_names_its_model_keeps_it_and_is_not_counted() -> None:
    named = Conversation(id="x", turns=[Turn(text="p", input_tokens=1, model="pinned")])
    out = assign_models([named, *_conversations(2)], ["a", "b"])
    assert _models(out) == ["pinned", "a", "b"]


def test_random_is_aiperfs_seeded_derivation_and_reproducible() -> None:
    # AIPerf 0.13: rng.derive("composer.turn.model_selection") seeds random.Random with the first
    # 8 bytes (big-endian) of sha256("<root seed>:<identifier>"), then .choice() per turn.
    digest = hashlib.sha256(b"42:composer.turn.model_selection").digest()
    theirs = random.Random(int.from_bytes(digest[:8], "big"))
    expected = [theirs.choice(["a", "b", "c"]) for _ in range(50)]
    assert model_sequence(["a", "b", "c"], 50, strategy="random", seed=42) == expected
    assert model_sequence(["a", "b", "c"], 50, strategy="random", seed=42) != \
        model_sequence(["a", "b", "c"], 50, strategy="random", seed=43)
    assert set(expected) == {"a", "b", "c"}


def test_weighted_follows_the_weights() -> None:
    picks = Counter(model_sequence(["a", "b"], 4000, strategy="weighted", weights=[0.8, 0.2], seed=5))
    assert 0.75 < picks["a"] / 4000 < 0.85
    assert model_sequence(["a", "b"], 10, strategy="weighted", weights=[0.0, 1.0], seed=5) == ["b"] * 10


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"strategy": "fastest"}, "unknown strategy 'fastest'"),
    ({"strategy": "weighted", "weights": [1.0]}, "weighted needs one weight per model"),
])
def test_bad_selections_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model_sequence(["a", "b"], 3, **kwargs)  # type: ignore[arg-type]
