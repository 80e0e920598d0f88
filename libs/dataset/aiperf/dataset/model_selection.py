"""Which model each turn is sent to when a benchmark names several (AIPerf's `models.strategy`).

AIPerf 0.13 picks the model of every turn while it composes the dataset, in conversation then
turn order, and sends it as the request's ``model``; so do we, so `inputs.json` shows it and
every worker sends the same turn to the same model:

- ``round_robin``: the n-th turn (counting from 0 over the whole dataset) gets model n mod k.
- ``random``: a uniform choice per turn from Python's `random.Random` seeded the way AIPerf
  derives its ``composer.turn.model_selection`` generator from the benchmark's random seed (the
  first 8 bytes, big-endian, of SHA-256 of ``"<seed>:composer.turn.model_selection"``), so a
  seeded run picks the same models as AIPerf's; unseeded, a fresh choice each run.
- ``weighted``: a choice per turn with probability ``weights[i]``, from the same generator
  (`random.Random.choices`). AIPerf 0.13 documents this strategy and validates its weights but
  its dataset composer refuses it at run time; we run it as documented.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import msgspec

from aiperf.dataset.model import Conversation

STRATEGIES = ("round_robin", "random", "weighted")
"""The strategies `assign_models` knows."""

SELECTION_RNG_ID = "composer.turn.model_selection"
"""AIPerf's identifier of the generator its composer picks models with."""


def selection_rng(seed: int | None) -> random.Random:
    """The generator `random`/`weighted` draw from: AIPerf's derivation of its model-selection
    generator from the root `seed` (None: unseeded)."""
    if seed is None:
        return random.Random()  # noqa: S311 - load shaping, not cryptography
    digest = hashlib.sha256(f"{seed}:{SELECTION_RNG_ID}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))  # noqa: S311


def model_sequence(models: Sequence[str], count: int, *, strategy: str = "round_robin",
                   weights: Sequence[float] = (), seed: int | None = None) -> list[str]:
    """The models of `count` turns in dataset order. Raises `ValueError` for an unknown
    strategy, no models, or `weighted` without one weight per model."""
    if not models:
        raise ValueError("model selection: no models")
    if strategy == "round_robin":
        return [models[n % len(models)] for n in range(count)]
    rng = selection_rng(seed)
    if strategy == "random":
        return [rng.choice(models) for _ in range(count)]
    if strategy == "weighted":
        if len(weights) != len(models):
            raise ValueError(f"model selection: weighted needs one weight per model ({len(models)})")
        return [rng.choices(models, weights=weights)[0] for _ in range(count)]
    raise ValueError(f"model selection: unknown strategy {strategy!r} ({', '.join(STRATEGIES)})")


def assign_models(conversations: Sequence[Conversation], models: Sequence[str], *,
                  strategy: str = "round_robin", weights: Sequence[float] = (),
                  seed: int | None = None) -> list[Conversation]:
    """`conversations` with each turn's `model` set per `strategy` (see the module), in
    conversation then turn order. One model: returned unchanged (every request goes to it, no
    per-turn model is stored). A turn that already names a model keeps it and is not counted."""
    conversations = list(conversations)
    if len(models) < 2:
        return conversations
    open_turns = sum(1 for c in conversations for t in c.turns if t.model is None)
    picks = iter(model_sequence(models, open_turns, strategy=strategy, weights=weights, seed=seed))
    return [msgspec.structs.replace(c, turns=[t if t.model is not None else msgspec.structs.replace(t, model=next(picks))
                                              for t in c.turns])
            for c in conversations]
