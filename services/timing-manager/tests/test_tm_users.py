"""User-centric phases (AIPerf's `user_centric`: users sharing a rate, each at its own pace) and
session budgets (`sessions`: stop starting conversations after that many, finish their turns),
against fakes at the timing-manager's ports on a virtual clock."""

from __future__ import annotations

import pytest

from aiperf.config import Benchmark, ConcurrencyPhase, UserCentricPhase
from aiperf.issuing.ports import TurnTiming
from aiperf.issuing.strategies import initial_users
from tests._tm_fakes import FakeConversations, make_rig, running

pytestmark = pytest.mark.anyio

NS = 1_000_000_000


def _benchmark(phase: ConcurrencyPhase | UserCentricPhase) -> Benchmark:
    return Benchmark(models=["m"], phases=[phase], random_seed=1)


def test_the_initial_users_spread_over_a_session_as_aiperf_spreads_them() -> None:
    # AIPerf 0.13.0's worked example: 15 users, 20 turns (19 gaps)
    users = initial_users(15, 19)
    assert users[-1] == (0, None) and len(users) == 15
    assert sorted(order for order, _ in users) == list(range(15))
    orders = dict(users)  # the table in its docstring: turns left by start second
    assert [orders[s] for s in (1, 2, 3, 4, 8, 12, 14)] == [6, 11, 16, 2, 3, 4, 14]
    # a shared factor (10 users, 5 gaps) still gives distinct start slots
    assert len({order for order, _ in initial_users(10, 5)}) == len(initial_users(10, 5))


async def test_each_user_sends_its_next_turn_one_gap_after_the_previous() -> None:
    turns = [TurnTiming(None, None)] * 3
    phase = UserCentricPhase(users=2, rate=4.0, requests=12)
    rig = make_rig(_benchmark(phase), conversations=FakeConversations([turns] * 20), behaviour=lambda w, c: 0.01)
    async with running(rig):
        accounting = await rig.start()
    assert accounting["phases"]["profiling"]["issued"] == 12
    by_conversation: dict[str, list[int]] = {}
    for seen in rig.workers.credits():
        by_conversation.setdefault(seen.credit.conversation_id, []).append(seen.credit.scheduled_at_ns)
    gap = 2 * NS // 4  # users / rate seconds
    full = [times for times in by_conversation.values() if len(times) == 3]
    assert full and all(b - a == gap for times in full for a, b in zip(times, times[1:], strict=False))
    firsts = sorted(times[0] for times in by_conversation.values())
    assert firsts[1] - firsts[0] == NS // 4  # the first users start 1 / rate apart


async def test_a_slow_answer_delays_only_that_users_next_turn() -> None:
    turns = [TurnTiming(None, None)] * 2
    phase = UserCentricPhase(users=1, rate=10.0, duration=2.0)
    rig = make_rig(_benchmark(phase), conversations=FakeConversations([turns] * 50),
                   behaviour=lambda w, c: 1.0 if c.conversation_id == "conv-0" else 0.01)
    async with running(rig):
        await rig.start()
    first, second = (s for s in rig.workers.credits() if s.credit.conversation_id == "conv-0")
    assert (first.credit.turn_index, second.credit.turn_index) == (0, 1)
    assert second.at_ns - first.at_ns >= NS  # max(its return, its send + 0.1 s)
    # meanwhile a new user started when the first one's turns were due to end (2 x 0.1 s)
    assert any(s.credit.conversation_id == "conv-1" and s.at_ns < second.at_ns for s in rig.workers.credits())


async def test_a_session_budget_finishes_the_conversations_it_started() -> None:
    turns = [TurnTiming(None, None)] * 3
    phase = ConcurrencyPhase(concurrency=2, sessions=3)
    rig = make_rig(_benchmark(phase), conversations=FakeConversations([turns] * 10), behaviour=lambda w, c: 0.01)
    async with running(rig):
        accounting = await rig.start()
    credits = rig.workers.credits()
    assert accounting["phases"]["profiling"]["issued"] == 9 == len(credits)
    assert sorted({s.credit.conversation_id for s in credits}) == ["conv-0", "conv-1", "conv-2"]
