"""Prefill concurrency (AIPerf's `prefillConcurrency` and `prefillRamp`) against fakes at the
timing-manager's ports, in virtual time: at most N credits wait for their first token; a slot
comes back at the first token, or at the return of a credit that never reported one; a ramp
opens the cap one slot at a time."""

from __future__ import annotations

import msgspec
import pytest

from aiperf.config import Benchmark
from aiperf.config.benchmark import Ramp
from aiperf.issuing.ledger import PhaseLedger
from aiperf.messages import CreditReturn, Phase
from tests._tm_fakes import START_NS, make_rig, profile, running

pytestmark = pytest.mark.anyio

S = 1_000_000_000


def with_prefill(benchmark: Benchmark, cap: int, ramp_s: float | None = None) -> Benchmark:
    """`benchmark` with its profiling phase's prefill cap (and ramp)."""
    phase = msgspec.structs.replace(benchmark.phases[-1], prefill_concurrency=cap,
                                    prefill_ramp=Ramp(duration=ramp_s) if ramp_s is not None else None)
    return msgspec.structs.replace(benchmark, phases=[*benchmark.phases[:-1], phase])


def issued_s(rig: object) -> list[float]:
    return [round((s.credit.issued_at_ns - START_NS) / S, 6) for s in rig.workers.credits()]  # type: ignore[attr-defined]


async def test_a_closed_loop_waits_for_first_tokens_not_for_returns() -> None:
    rig = make_rig(with_prefill(profile(concurrency=6, request_count=6), cap=2),
                   behaviour=lambda w, c: 10.0)
    rig.workers.first_token = lambda w, c: 1.0
    async with running(rig):
        result = await rig.start()
    assert issued_s(rig) == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert all(s.credit.report_first_token for s in rig.workers.credits())
    assert rig.workers.max_in_flight == 6  # the concurrency is not the prefill cap
    assert result["phases"]["profiling"]["ok"] == 6


async def test_a_credit_that_returns_without_a_first_token_gives_its_slot_back() -> None:
    rig = make_rig(with_prefill(profile(concurrency=4, request_count=4), cap=1),
                   behaviour=lambda w, c: 3.0)
    async with running(rig):  # no first token ever (a failed request, or not streamed)
        result = await rig.start()
    assert issued_s(rig) == [0.0, 3.0, 6.0, 9.0]
    assert result["phases"]["profiling"]["returned"] == 4


async def test_a_rate_phase_sends_on_time_while_slots_are_free_and_waits_when_not() -> None:
    rig = make_rig(with_prefill(profile(request_rate=10, request_rate_mode="constant", request_count=4), cap=1),
                   behaviour=lambda w, c: 0.5)
    rig.workers.first_token = lambda w, c: 0.25
    async with running(rig):
        await rig.start()
    assert issued_s(rig) == pytest.approx([0.0, 0.25, 0.5, 0.75], abs=0.01)
    credits = rig.workers.credits()
    lag = [(c.credit.issued_at_ns - c.credit.scheduled_at_ns) / S for c in credits]
    assert lag[0] < 0 and lag[-1] > 0.4  # sent ahead while free; late behind the cap


async def test_a_prefill_ramp_opens_one_slot_at_a_time() -> None:
    rig = make_rig(with_prefill(profile(concurrency=4, request_count=4), cap=4, ramp_s=3.0),
                   behaviour=lambda w, c: 100.0)
    rig.workers.first_token = lambda w, c: 50.0
    async with running(rig):
        await rig.start()
    assert issued_s(rig) == [0.0, 1.0, 2.0, 3.0]


async def test_a_first_token_releases_one_prefill_slot_once() -> None:
    ledger = PhaseLedger(Phase.PROFILING, count=None, concurrency_cap=None, prefill_cap=1)
    assert ledger.prefill is not None
    ledger.prefill.acquire_nowait()
    entry = ledger.open(worker="w0", conversation=0, turn=0, holds_slot=False, holds_prefill=True)
    assert ledger.first_token(entry.num) is True and ledger.prefill.value == 1
    assert ledger.first_token(entry.num) is False and ledger.prefill.value == 1  # a duplicate
    assert ledger.first_token(99) is False  # not in flight (settled, or never issued)
    ledger.settle(CreditReturn(worker_id="w0", phase=Phase.PROFILING, num=entry.num))
    assert ledger.prefill.value == 1 and ledger.first_tokens == 1
