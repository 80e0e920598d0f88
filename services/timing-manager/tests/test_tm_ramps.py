"""Ramps (AIPerf's `concurrencyRamp` and `rateRamp`) against fakes at the timing-manager's ports,
in virtual time: a closed loop's users start one by one, a rate phase's cap opens one slot at a
time, and a ramped rate follows its ramp."""

from __future__ import annotations

import bisect
import itertools
import random

import msgspec
import pytest

from aiperf.config import Benchmark
from aiperf.config.benchmark import Ramp
from aiperf.issuing.schedule import arrival_offsets_ns, ramped_rate
from aiperf.issuing.strategies import ramp_steps_s
from aiperf.messages import PhaseComplete
from tests._tm_fakes import START_NS, make_rig, profile, running

pytestmark = pytest.mark.anyio

S = 1_000_000_000


def ramped(benchmark: Benchmark, **ramps: float) -> Benchmark:
    """`benchmark` with its profiling phase's ramps (`concurrency_ramp=4.0`, `rate_ramp=...`)."""
    phase = benchmark.phases[-1]
    changed = msgspec.structs.replace(phase, **{k: Ramp(duration=v) for k, v in ramps.items()})
    return msgspec.structs.replace(benchmark, phases=[*benchmark.phases[:-1], changed])


def test_concurrency_steps_are_aiperfs_linear_ramp() -> None:
    assert ramp_steps_s(5, 4.0) == [1.0, 2.0, 3.0, 4.0]
    assert ramp_steps_s(3, 10.0) == [5.0, 10.0]
    assert ramp_steps_s(1, 10.0) == []


def test_a_ramped_rate_starts_at_a_tenth_of_a_second_of_the_ramp_and_steps_every_tenth() -> None:
    assert ramped_rate(100, 10, 0.0) == pytest.approx(1.0)  # 100 x 0.1 s / 10 s
    assert ramped_rate(100, 10, 0.05) == pytest.approx(1.0)
    assert ramped_rate(100, 10, 0.1) == pytest.approx(1.0 + 99 * 0.01)
    assert ramped_rate(100, 10, 5.0) == pytest.approx(1.0 + 99 * 0.5)
    assert ramped_rate(100, 10, 10.0) == ramped_rate(100, 10, 99.0) == 100


@pytest.mark.parametrize("mode", ["constant", "poisson", "gamma"])
def test_ramped_arrivals_follow_the_ramp(mode: str) -> None:
    offsets = list(itertools.islice(arrival_offsets_ns(rate=100, mode=mode, smoothness=4, rng=random.Random(5),  # type: ignore[arg-type]
                                                       ramp_s=10), 20_000))
    assert offsets[0] == 0 and offsets == sorted(offsets)
    for second in range(0, 30):
        got = bisect.bisect_left(offsets, (second + 1) * S) - bisect.bisect_left(offsets, second * S)
        expected = sum(ramped_rate(100, 10, second + k / 10) for k in range(10)) / 10
        slack = 1.5 if mode == "constant" else 4 * expected ** 0.5 + 2
        assert abs(got - expected) <= slack, (second, got, expected)


async def test_a_closed_loops_users_start_one_by_one_over_the_ramp() -> None:
    rig = make_rig(ramped(profile(concurrency=5, request_count=5), concurrency_ramp=4.0),
                   behaviour=lambda w, c: 100.0)
    async with running(rig):
        result = await rig.start()
    issued = [(s.credit.issued_at_ns - START_NS) / S for s in rig.workers.credits()]
    assert issued == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0], abs=1e-6)
    assert result["phases"]["profiling"]["issued"] == 5


async def test_a_spent_budget_ends_the_ramp() -> None:
    """The first user spends the budget long before the second is due: the phase does not wait."""
    rig = make_rig(ramped(profile(concurrency=10, request_count=3), concurrency_ramp=100.0),
                   behaviour=lambda w, c: 0.01)
    async with running(rig):
        result = await rig.start()
    assert result["phases"]["profiling"]["issued"] == 3
    (complete,) = (e for e in rig.events.events if isinstance(e, PhaseComplete))
    assert complete.at_ns - START_NS < 1 * S


async def test_a_rate_phases_cap_opens_one_slot_at_a_time() -> None:
    rig = make_rig(ramped(profile(request_rate=1000, request_rate_mode="constant", concurrency=4,
                                  request_count=4), concurrency_ramp=3.0),
                   behaviour=lambda w, c: 100.0)
    async with running(rig):
        result = await rig.start()
    issued = [(s.credit.issued_at_ns - START_NS) / S for s in rig.workers.credits()]
    assert issued == pytest.approx([0.0, 1.0, 2.0, 3.0], abs=0.01)
    assert result["phases"]["profiling"]["issued"] == 4


async def test_a_ramped_rate_phase_sends_at_the_ramped_offsets() -> None:
    rig = make_rig(ramped(profile(request_rate=50, request_rate_mode="constant", request_count=60),
                          rate_ramp=2.0), behaviour=lambda w, c: 0.001)
    async with running(rig):
        await rig.start()
    stamps = [s.credit.scheduled_at_ns for s in rig.workers.credits()]
    expected = list(itertools.islice(arrival_offsets_ns(rate=50, mode="constant", rng=random.Random(0),
                                                        ramp_s=2.0), 60))
    assert [t - stamps[0] for t in stamps] == expected
    assert stamps[-1] - stamps[0] > 60 / 50 * S  # slower than the unramped 1.2 s
