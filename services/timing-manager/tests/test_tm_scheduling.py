"""Scheduling logic of the TimingManager against fakes at its ports (virtual time)."""

from __future__ import annotations

import random
import statistics

import anyio
import pytest

from aiperf.issuing.ports import TurnTiming
from aiperf.issuing.schedule import arrival_offsets_ns, fixed_offsets_ns, percentile
from aiperf.messages import (
    CancelCredits,
    Credit,
    CreditsLost,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    ProfileCancel,
    TimePing,
    TimePong,
    WorkerLeaving,
    WorkerLost,
)
from aiperf.runtime import GiveUp, UserError
from tests._tm_fakes import FakeConversations, make_rig, profile, running

pytestmark = pytest.mark.anyio

MS = 1_000_000


def balanced(phase: dict[str, int]) -> bool:
    return (phase["issued"] == phase["ok"] + phase["failed"] + phase["cancelled"] + phase["lost"]
            and phase["returned"] + phase["lost"] == phase["issued"])


# -- closed loop ------------------------------------------------------------------------


async def test_closed_loop_issues_exactly_n_and_never_more_than_c_in_flight() -> None:
    rng = random.Random(1)
    rig = make_rig(profile(concurrency=4, request_count=50), workers=3,
                   behaviour=lambda w, c: rng.uniform(0.01, 0.2))
    rig.workers.fail_nums = {3, 7}
    async with running(rig):
        result = await rig.start()
    seen = rig.workers.credits()
    assert [s.credit.num for s in seen] == list(range(50))
    assert rig.workers.max_in_flight == 4
    assert [s.credit.conversation_id for s in seen[:7]] == [f"conv-{i % 5}" for i in range(7)]
    assert all(s.credit.scheduled_at_ns == 0 for s in seen)
    phase = result["phases"]["profiling"]
    assert result["cancelled"] is False
    assert (phase["issued"], phase["returned"], phase["ok"], phase["failed"]) == (50, 50, 48, 2)
    assert balanced(phase) and phase["stopped_reason"] == ""
    assert {s.worker for s in seen} == {"w0", "w1", "w2"}


async def test_third_credit_waits_for_a_free_slot() -> None:
    rig = make_rig(profile(concurrency=2, request_count=3), behaviour=lambda w, c: None)
    async with running(rig), anyio.create_task_group() as tg:
        tg.start_soon(rig.start)
        with anyio.fail_after(5):
            while len(rig.workers.seen) < 2:
                await anyio.sleep(0.001)
        await anyio.wait_all_tasks_blocked()
        assert len(rig.workers.seen) == 2
        first = rig.workers.seen[0].credit
        await rig.workers._return("w0", first)
        with anyio.fail_after(5):
            while len(rig.workers.seen) < 3:
                await anyio.sleep(0.001)
        assert rig.workers.seen[2].credit.num == 2
        for worker, credit in list(rig.workers.in_flight.values()):
            await rig.workers._return(worker, credit)


async def test_least_loaded_worker_gets_the_credit() -> None:
    rig = make_rig(profile(concurrency=3, request_count=3), workers=3, behaviour=lambda w, c: None)
    async with running(rig), anyio.create_task_group() as tg:
        tg.start_soon(rig.start)
        with anyio.fail_after(5):
            while len(rig.workers.seen) < 3:
                await anyio.sleep(0.001)
        assert sorted(s.worker for s in rig.workers.seen) == ["w0", "w1", "w2"]
        for worker, credit in list(rig.workers.in_flight.values()):
            await rig.workers._return(worker, credit)


async def test_warmup_runs_first_then_profiling() -> None:
    rig = make_rig(profile(concurrency=2, request_count=6, warmup_request_count=3),
                   behaviour=lambda w, c: 0.01)
    async with running(rig):
        result = await rig.start()
    phases = [s.credit.phase for s in rig.workers.seen]
    assert phases == ["warmup"] * 3 + ["profiling"] * 6
    assert [s.credit.conversation_id for s in rig.workers.seen[3:5]] == ["conv-0", "conv-1"]
    assert result["phases"]["warmup"]["issued"] == 3 and result["phases"]["profiling"]["issued"] == 6
    kinds = [type(e) for e in rig.events.events]
    assert kinds == [PhaseStarted, PhaseSendingComplete, PhaseComplete] * 2


# -- open loop ----------------------------------------------------------------------------


async def test_constant_rate_is_exact_and_sent_ahead() -> None:
    rig = make_rig(profile(request_rate=100, request_rate_mode="constant", request_count=20),
                   behaviour=lambda w, c: 0.5)
    async with running(rig):
        result = await rig.start()
    credits = [s.credit for s in rig.workers.credits()]
    gaps = {b.scheduled_at_ns - a.scheduled_at_ns for a, b in zip(credits, credits[1:], strict=False)}
    assert gaps == {10 * MS}
    assert all(c.scheduled_at_ns - c.issued_at_ns == 2 * MS for c in credits)
    phase = result["phases"]["profiling"]
    assert phase["schedule_lag_p50_ns"] == phase["schedule_lag_p99_ns"] == -2 * MS
    assert balanced(phase) and phase["issued"] == 20


async def test_poisson_mean_interval_and_seeded() -> None:
    rate = 200.0
    rig = make_rig(profile(request_rate=rate, request_count=2000, random_seed=7), workers=2,
                   behaviour=lambda w, c: 0.02)
    async with running(rig):
        result = await rig.start()
    stamps = [s.credit.scheduled_at_ns for s in rig.workers.credits()]
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert abs(statistics.fmean(gaps) / (1e9 / rate) - 1) < 0.05
    assert abs(statistics.stdev(gaps) / statistics.fmean(gaps) - 1) < 0.1  # exponential: CV 1
    assert result["phases"]["profiling"]["issued"] == 2000
    again = list(zip(arrival_offsets_ns(rate=rate, mode="poisson", rng=random.Random("7:arrivals")),
                     range(2000), strict=False))
    assert [s - stamps[0] for s in stamps] == [o for o, _ in again]


def test_gamma_gaps_have_the_asked_mean_and_smoothness() -> None:
    offsets = arrival_offsets_ns(rate=50, mode="gamma", smoothness=4.0, rng=random.Random(3))
    stamps = [next(offsets) for _ in range(4000)]
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert abs(statistics.fmean(gaps) / 20e6 - 1) < 0.05
    assert abs(statistics.stdev(gaps) / statistics.fmean(gaps) - 0.5) < 0.05  # CV = 1/sqrt(k)


async def test_open_loop_cap_limits_in_flight_and_shows_lag() -> None:
    rig = make_rig(profile(request_rate=1000, request_rate_mode="constant", concurrency=2,
                           request_count=20), behaviour=lambda w, c: 0.01)
    async with running(rig):
        result = await rig.start()
    assert rig.workers.max_in_flight == 2
    phase = result["phases"]["profiling"]
    assert phase["issued"] == 20 and balanced(phase)
    assert phase["schedule_lag_p99_ns"] > 0  # waited for slots: late against the schedule


async def test_cancellation_rate_marks_a_seeded_fraction() -> None:
    rig = make_rig(profile(request_rate=1000, request_count=400, request_cancellation_rate=25,
                           request_cancellation_delay=0.5, random_seed=1), behaviour=lambda w, c: 0.001)
    async with running(rig):
        await rig.start()
    marked = [s.credit for s in rig.workers.credits() if s.credit.should_cancel]
    assert 60 < len(marked) < 140
    assert {c.cancel_after_ns for c in marked} == {500 * MS}
    assert all(s.credit.cancel_after_ns == 0 for s in rig.workers.credits() if not s.credit.should_cancel)


# -- fixed schedule -------------------------------------------------------------------------


async def test_fixed_schedule_follows_timestamps_relative_to_the_first() -> None:
    stamps = [1000.0, 1000.0, 1250.5, 1100.0, 3000.0]
    rig = make_rig(profile(fixed_schedule=True),
                   conversations=FakeConversations.single_turn(5, stamps), behaviour=lambda w, c: 0.05)
    async with running(rig):
        result = await rig.start()
    credits = [s.credit for s in rig.workers.credits()]
    assert [c.conversation_id for c in credits] == ["conv-0", "conv-1", "conv-3", "conv-2", "conv-4"]
    t0 = credits[0].scheduled_at_ns
    assert [c.scheduled_at_ns - t0 for c in credits] == [0, 0, 100 * MS, 250_500_000, 2000 * MS]
    assert all(s.at_ns == s.credit.scheduled_at_ns - 2 * MS for s in rig.workers.credits())
    assert result["phases"]["profiling"]["issued"] == 5


def test_fixed_schedule_needs_every_timestamp() -> None:
    with pytest.raises(UserError, match="no timestamp"):
        fixed_offsets_ns([1.0, None])


async def test_fixed_schedule_window_replays_its_part_from_the_start_offset() -> None:
    """AIPerf 0.13.0's --fixed-schedule-start/end-offset: entries outside [start, end] (ms,
    inclusive) are skipped; the start offset is the replay's zero."""
    stamps = [0.0, 100.0, 250.0, 400.0, 401.0]
    rig = make_rig(profile(fixed_schedule=True, fixed_schedule_start_offset=100, fixed_schedule_end_offset=400),
                   conversations=FakeConversations.single_turn(5, stamps), behaviour=lambda w, c: 0.05)
    async with running(rig):
        result = await rig.start()
    credits = [s.credit for s in rig.workers.credits()]
    assert [c.conversation_id for c in credits] == ["conv-1", "conv-2", "conv-3"]
    assert result["phases"]["profiling"]["issued"] == 3


def test_fixed_schedule_window_offsets() -> None:
    stamps: list[float | None] = [50.0, 100.0, 250.0, 400.0]
    assert fixed_offsets_ns(stamps, auto_offset=False, start_ms=100) == [(0, 1), (150 * MS, 2), (300 * MS, 3)]
    assert fixed_offsets_ns(stamps, end_ms=100) == [(0, 0), (50 * MS, 1)]  # zero: the earliest kept
    assert fixed_offsets_ns(stamps, auto_offset=False, end_ms=100) == [(50 * MS, 0), (100 * MS, 1)]
    with pytest.raises(UserError, match=r"no trace timestamp lies in \[500, -\] ms \(the trace spans 50..400 ms\)"):
        fixed_offsets_ns(stamps, auto_offset=False, start_ms=500)


# -- multi-turn ---------------------------------------------------------------------------------


async def test_multi_turn_turns_follow_returns_on_the_same_worker() -> None:
    three = [TurnTiming(None, None), TurnTiming(100.0, None), TurnTiming(None, None)]
    rig = make_rig(profile(concurrency=2, request_count=12),
                   conversations=FakeConversations([three, three]), workers=3,
                   behaviour=lambda w, c: 0.03)
    async with running(rig):
        result = await rig.start()
    by_conv: dict[tuple[str, int], list] = {}
    conv_round = 0
    for s in rig.workers.credits():
        if s.credit.turn_index == 0:
            conv_round += 1
            by_conv[(s.credit.conversation_id, conv_round)] = []
        key = next(k for k in reversed(by_conv) if k[0] == s.credit.conversation_id)
        by_conv[key].append(s)
    assert len(by_conv) == 4
    for turns in by_conv.values():
        assert [t.credit.turn_index for t in turns] == [0, 1, 2]
        assert len({t.worker for t in turns}) == 1
        assert turns[1].at_ns - turns[0].at_ns == 30 * MS + 100 * MS  # return, then delay
        assert turns[2].at_ns - turns[1].at_ns == 30 * MS
    assert result["phases"]["profiling"]["issued"] == 12


async def test_open_loop_multi_turn_follow_ups_are_sticky() -> None:
    two = [TurnTiming(None, None), TurnTiming(10.0, None)]
    rig = make_rig(profile(request_rate=100, request_rate_mode="constant", request_count=10),
                   conversations=FakeConversations([two] * 10), workers=2, behaviour=lambda w, c: 0.05)
    async with running(rig):
        result = await rig.start()
    seen = rig.workers.credits()
    assert len(seen) == 10 and balanced(result["phases"]["profiling"])
    firsts = {s.credit.num: s for s in seen if s.credit.turn_index == 0}
    for s in seen:
        if s.credit.turn_index == 1:
            (first,) = (f for f in firsts.values() if f.credit.conversation_id == s.credit.conversation_id)
            assert s.worker == first.worker and s.credit.scheduled_at_ns == 0
            assert s.at_ns - first.at_ns == 60 * MS


# -- workers lost, cancel, duration ----------------------------------------------------------


async def test_worker_lost_declares_its_credits_lost_and_accounting_balances() -> None:
    rig = make_rig(profile(concurrency=4, request_count=20), workers=2,
                   behaviour=lambda w, c: None if w == "w1" else 0.01)
    async with running(rig), anyio.create_task_group() as tg:
        done: dict[str, object] = {}

        async def start() -> None:
            done.update(await rig.start())

        tg.start_soon(start)
        with anyio.fail_after(5):
            while rig.tm.pool.in_flight("w1") < 2:
                await anyio.sleep(0.001)
        held = rig.tm.pool.in_flight("w1")
        reply = await rig.tm.handle(WorkerLost(request_id="x", worker_id="w1"))
        assert reply == CreditsLost(lost=held)
    phase = done["phases"]["profiling"]  # type: ignore[index]
    assert phase["issued"] == 20 and phase["lost"] == held and balanced(phase)
    assert phase["stopped_reason"] == ""
    assert all(s.worker == "w0" for s in rig.workers.credits()[-5:])


async def test_last_worker_lost_ends_the_phase_with_a_reason() -> None:
    rig = make_rig(profile(concurrency=2, request_count=100, warmup_request_count=2),
                   behaviour=lambda w, c: None if c.phase == "profiling" else 0.0)
    async with running(rig), anyio.create_task_group() as tg:
        done: dict[str, object] = {}

        async def start() -> None:
            done.update(await rig.start())

        tg.start_soon(start)
        with anyio.fail_after(5):
            while len(rig.workers.credits()) < 2:
                await anyio.sleep(0.001)
        assert (await rig.tm.handle(WorkerLost(request_id="x", worker_id="w0"))) == CreditsLost(lost=2)
    phase = done["phases"]["profiling"]  # type: ignore[index]
    assert (phase["issued"], phase["lost"], phase["stopped_reason"]) == (2, 2, "no workers left")
    assert balanced(phase) and done["cancelled"] is False
    assert done["stopped_reason"] == "no workers left"


async def test_worker_leaving_gets_no_new_credits_but_returns_count() -> None:
    rig = make_rig(profile(concurrency=2, request_count=10), workers=2, behaviour=lambda w, c: 0.01)
    async with running(rig):
        await rig.returns.tx.send(WorkerLeaving(worker_id="w1"))
        with anyio.fail_after(5):
            while "w1" in rig.tm.pool:
                await anyio.sleep(0.001)
        result = await rig.start()
    assert {s.worker for s in rig.workers.credits()} == {"w0"}
    assert balanced(result["phases"]["profiling"])


async def test_unreachable_worker_is_dropped_and_the_credit_goes_elsewhere() -> None:
    rig = make_rig(profile(concurrency=2, request_count=6), workers=2, behaviour=lambda w, c: 0.01)
    rig.router.unreachable.add("w0")
    async with running(rig):
        result = await rig.start()
    assert {s.worker for s in rig.workers.credits()} == {"w1"}
    phase = result["phases"]["profiling"]
    assert phase["issued"] == 6 and phase["ok"] == 6


async def test_cancel_stops_issuing_and_counts_cancelled() -> None:
    rig = make_rig(profile(concurrency=3, request_count=100), workers=2, behaviour=lambda w, c: None)
    async with running(rig), anyio.create_task_group() as tg:
        done: dict[str, object] = {}

        async def start() -> None:
            done.update(await rig.start())

        tg.start_soon(start)
        with anyio.fail_after(5):
            while len(rig.workers.seen) < 3:
                await anyio.sleep(0.001)
        assert await rig.tm.handle(ProfileCancel(request_id="k")) is None
    assert done["cancelled"] is True
    phase = done["phases"]["profiling"]  # type: ignore[index]
    assert (phase["issued"], phase["cancelled"], phase["lost"]) == (3, 3, 0) and balanced(phase)
    assert phase["stopped_reason"] == "cancelled"
    assert sorted(w for w, _ in rig.workers.cancels) == ["w0", "w1"]
    assert all(isinstance(c, CancelCredits) and c.phase == "profiling" for _, c in rig.workers.cancels)


async def test_cancel_with_a_silent_worker_counts_the_rest_lost_after_the_bounded_wait() -> None:
    rig = make_rig(profile(concurrency=2, request_count=10), workers=2, behaviour=lambda w, c: None,
                   cancel_drain_s=3.0)
    rig.workers.deaf.add("w1")
    async with running(rig), anyio.create_task_group() as tg:
        done: dict[str, object] = {}

        async def start() -> None:
            done.update(await rig.start())

        tg.start_soon(start)
        with anyio.fail_after(5):
            while len(rig.workers.seen) < 2:
                await anyio.sleep(0.001)
        before = rig.clock()
        await rig.tm.handle(ProfileCancel(request_id="k"))
    phase = done["phases"]["profiling"]  # type: ignore[index]
    assert (phase["cancelled"], phase["lost"]) == (1, 1) and balanced(phase)
    assert rig.clock() - before == 3_000_000_000


async def test_cancel_before_start_issues_nothing() -> None:
    rig = make_rig(profile(concurrency=1, request_count=5))
    async with running(rig):
        await rig.tm.handle(ProfileCancel(request_id="k"))
        result = await rig.start()
    assert result["cancelled"] is True and rig.workers.seen == []


async def test_duration_stops_issuing_and_in_flight_finish_within_grace() -> None:
    rig = make_rig(profile(concurrency=2, benchmark_duration=1.0, benchmark_grace_period=5.0),
                   behaviour=lambda w, c: 0.3)
    async with running(rig):
        start = rig.clock()
        result = await rig.start()
    phase = result["phases"]["profiling"]
    # two sessions, a credit every 0.3 s each, issuing stops at 1.0 s: 4 rounds (0, .3, .6, .9)
    assert phase["issued"] == 8 and phase["ok"] == 8 and balanced(phase)
    assert rig.workers.cancels == []
    assert rig.clock() - start == 1_200_000_000


async def test_duration_grace_over_cancels_the_rest() -> None:
    rig = make_rig(profile(request_rate=10, request_rate_mode="constant", benchmark_duration=1.05,
                           benchmark_grace_period=2.0),
                   behaviour=lambda w, c: 0.05 if c.num % 2 == 0 else None)
    async with running(rig):
        start = rig.clock()
        result = await rig.start()
    phase = result["phases"]["profiling"]
    assert phase["issued"] == 11  # arrivals at 0, 0.1, ... 1.0 s
    assert (phase["ok"], phase["cancelled"], phase["lost"]) == (6, 5, 0) and balanced(phase)
    assert [c.reason for _, c in rig.workers.cancels] == ["grace period over"]
    assert rig.clock() - start == 3_050_000_000


# -- configure, pings, plans -------------------------------------------------------------------


async def test_configure_waits_for_the_expected_workers() -> None:
    rig = make_rig(profile(concurrency=1), workers=2)
    async with anyio.create_task_group() as tg:
        await tg.start(rig.tm.run)
        await tg.start(rig.workers.run)
        await rig.workers.connect("w0")
        configured = anyio.Event()

        async def configure() -> None:
            await rig.configure()
            configured.set()

        tg.start_soon(configure)
        await anyio.wait_all_tasks_blocked()
        assert not configured.is_set()
        await rig.workers.connect("w1")
        with anyio.fail_after(5):
            await configured.wait()
        assert len(rig.tm.pool) == 2
        tg.cancel_scope.cancel()


async def test_configure_fails_when_workers_are_missing() -> None:
    rig = make_rig(profile(concurrency=1), workers=2, registration_timeout_s=0.05)
    async with anyio.create_task_group() as tg:
        await tg.start(rig.tm.run)
        with pytest.raises(GiveUp, match="0 of 2 workers"):
            await rig.configure()
        tg.cancel_scope.cancel()


async def test_ping_gets_a_pong_with_the_managers_clock() -> None:
    rig = make_rig(profile(concurrency=1))
    async with anyio.create_task_group() as tg:
        await tg.start(rig.tm.run)
        await rig.router.pings_tx.send((b"w9", TimePing(worker_id="w9", seq=4, sent_at_ns=123)))
        with anyio.fail_after(5):
            worker, pong = await rig.router.outbox.receive()
        assert (worker, pong) == ("w9", TimePong(seq=4, ping_sent_at_ns=123, received_at_ns=rig.clock()))
        tg.cancel_scope.cancel()


def test_the_flags_become_phases() -> None:
    warm, prof = profile(concurrency=8, warmup_request_count=5).phases
    assert (warm.role, type(warm).__name__, warm.requests, warm.concurrency) == ("warmup", "ConcurrencyPhase", 5, 8)
    assert (type(prof).__name__, prof.requests, prof.concurrency) == ("ConcurrencyPhase", 16, 8)
    (rate,) = profile(request_rate=5.0, benchmark_duration=10).phases
    assert (type(rate).__name__, rate.requests, rate.concurrency, rate.duration) == ("PoissonPhase", None, None, 10)
    (fixed,) = profile(fixed_schedule=True).phases
    assert (type(fixed).__name__, fixed.requests) == ("FixedSchedulePhase", None)
    # AIPerf's CLI: the warmup of a rate run arrives at the profiling rate (issue 25), uncapped
    warm, _ = profile(request_rate=5.0, warmup_request_count=2).phases
    assert (type(warm).__name__, warm.rate, warm.requests, warm.concurrency) == ("PoissonPhase", 5.0, 2, None)


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) == 0
    assert percentile(list(range(1, 101)), 50) == 50
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([5], 99) == 5


def test_credit_fields_are_on_the_wire_message() -> None:
    assert {"phase", "num", "conversation_id", "turn_index", "issued_at_ns", "scheduled_at_ns"} <= set(
        Credit.__struct_fields__)


# -- credits lost on the wire ------------------------------------------------------------------


@pytest.mark.parametrize("lost", [{3}, {9}])  # one in the middle, the very last
async def test_a_credit_lost_on_the_wire_is_found_by_the_audit_and_the_run_ends(lost: set[int]) -> None:
    rig = make_rig(profile(concurrency=2, request_count=10), workers=2, behaviour=lambda w, c: 0.05,
                   audit_interval_s=1.0)
    rig.workers.lost_nums = lost
    async with running(rig):
        with anyio.fail_after(10):
            result = await rig.start()
    phase = result["phases"]["profiling"]
    assert (phase["issued"], phase["ok"], phase["lost"]) == (10, 9, 1)
    assert balanced(phase)


async def test_the_audit_leaves_credits_the_worker_holds_alone() -> None:
    rig = make_rig(profile(concurrency=2, request_count=4), workers=1, behaviour=lambda w, c: 30.0,
                   audit_interval_s=1.0)
    async with running(rig):
        with anyio.fail_after(10):
            result = await rig.start()  # every credit is held for 30 virtual seconds: many audits
    phase = result["phases"]["profiling"]
    assert (phase["issued"], phase["ok"], phase["lost"]) == (4, 4, 0)
    assert rig.workers.audits >= 20  # audited all along, never judged lost
