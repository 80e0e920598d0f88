"""Several endpoint URLs (AIPerf's `urls` with `urlStrategy: round_robin`) against fakes at the
timing-manager's ports: each conversation's first turn goes to the next URL in turn, per phase,
and its later turns to the same URL."""

from __future__ import annotations

import pytest

from aiperf.issuing.ports import TurnTiming
from tests._tm_fakes import FakeConversations, make_rig, profile, running

pytestmark = pytest.mark.anyio


async def test_conversations_go_to_the_urls_in_turn() -> None:
    rig = make_rig(profile(concurrency=2, request_count=7), urls=3, behaviour=lambda w, c: 0.1)
    async with running(rig):
        await rig.start()
    credits = sorted((s.credit for s in rig.workers.credits()), key=lambda c: c.num)
    assert [c.url_index for c in credits] == [0, 1, 2, 0, 1, 2, 0]


async def test_the_later_turns_of_a_conversation_follow_its_first() -> None:
    turns = [TurnTiming(None, None)] * 3
    rig = make_rig(profile(concurrency=2, request_count=12), urls=2, conversations=FakeConversations([turns] * 4),
                   behaviour=lambda w, c: 0.1)
    async with running(rig):
        await rig.start()
    credits = sorted((s.credit for s in rig.workers.credits()), key=lambda c: c.num)
    urls: dict[str, set[int]] = {}
    for credit in credits:  # each conversation runs once: 4 x 3 turns
        urls.setdefault(credit.conversation_id, set()).add(credit.url_index)
    assert urls == {"conv-0": {0}, "conv-1": {1}, "conv-2": {0}, "conv-3": {1}}
    assert [c.url_index for c in credits if c.turn_index == 0] == [0, 1, 0, 1]


async def test_a_rate_phase_and_a_single_url_too() -> None:
    rig = make_rig(profile(request_rate=100, request_rate_mode="constant", request_count=5), urls=2,
                   behaviour=lambda w, c: 0.001)
    async with running(rig):
        await rig.start()
    assert [s.credit.url_index for s in rig.workers.credits()] == [0, 1, 0, 1, 0]
    single = make_rig(profile(concurrency=1, request_count=3), behaviour=lambda w, c: 0.001)
    async with running(single):
        await single.start()
    assert [s.credit.url_index for s in single.workers.credits()] == [0, 0, 0]
