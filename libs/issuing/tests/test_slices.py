"""`slice_phase`: the pods' shares add up exactly to the whole plan, for any phase kind and
any number of pods."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.config import (
    ConcurrencyPhase,
    ConstantPhase,
    FixedSchedulePhase,
    GammaPhase,
    Phase,
    PoissonPhase,
    UserCentricPhase,
)
from aiperf.config.benchmark import Ramp
from aiperf.issuing.slices import decode_slice, encode_slice, pod_seed, share, slice_phase, slice_phases

BUDGETS = ("requests", "sessions", "concurrency", "prefill_concurrency", "users")
small = st.integers(min_value=1, max_value=5000)
maybe = st.none() | small
kinds = st.sampled_from(["warmup", "profiling"])


@st.composite
def phases(draw: st.DrawFn) -> Phase:
    kind = draw(st.sampled_from(["concurrency", "poisson", "gamma", "constant", "user_centric", "fixed"]))
    name = draw(kinds)
    requests, sessions, duration = draw(maybe), draw(maybe), draw(st.none() | st.floats(0.5, 100))
    if kind != "fixed" and requests is None and sessions is None and duration is None:
        requests = draw(small)
    concurrency = draw(small) if kind == "concurrency" else draw(maybe)
    prefill = None if concurrency is None else draw(st.none() | st.integers(1, concurrency))
    ramp = draw(st.none() | st.builds(Ramp, duration=st.floats(0.1, 30)))
    common = {"name": name, "requests": requests, "sessions": sessions, "duration": duration,
              "concurrency": concurrency, "prefill_concurrency": prefill}
    rate = draw(st.floats(0.01, 1e6))
    if kind == "concurrency":
        return ConcurrencyPhase(concurrency_ramp=ramp, **common)
    if kind == "fixed":
        return FixedSchedulePhase(**common)
    if kind == "user_centric":
        return UserCentricPhase(rate=rate, users=draw(small), **common)
    cls = {"poisson": PoissonPhase, "gamma": GammaPhase, "constant": ConstantPhase}[kind]
    return cls(rate=rate, rate_ramp=ramp, concurrency_ramp=ramp if concurrency else None, **common)


@settings(max_examples=120, deadline=None)
@given(phase=phases(), pods=st.integers(min_value=1, max_value=2000), seed=st.none() | st.integers(0, 2**40))
def test_the_shares_add_up_to_the_whole(phase: Phase, pods: int, seed: int | None) -> None:
    slices = slice_phase(phase, pods, seed=seed)
    assert [s.pod for s in slices] == list(range(pods))
    active = slices[0].active
    assert 1 <= active <= pods
    for name in BUDGETS:
        whole = getattr(phase, name, None)
        if whole is None:
            assert all(getattr(s, name) is None for s in slices)
            continue
        assert sum(getattr(s, name) for s in slices) == whole, name
        assert all(getattr(s, name) >= 1 for s in slices[:active]) and all(getattr(s, name) == 0 for s in slices[active:])
        assert all(getattr(s.phase, name) == getattr(s, name) for s in slices[:active])
    rate = getattr(phase, "rate", None)
    if rate is not None:
        assert math.isclose(math.fsum(s.rate or 0.0 for s in slices), rate, rel_tol=1e-9)
    for s in slices[:active]:
        assert s.phase is not None and type(s.phase) is type(phase)
        assert (s.phase.duration, s.phase.grace_s, s.phase.role) == (phase.duration, phase.grace_s, phase.role)
        assert (s.phase.concurrency_ramp, s.phase.cancellation) == (phase.concurrency_ramp, phase.cancellation)
        if s.phase.prefill_concurrency is not None:
            assert s.phase.concurrency is not None and s.phase.prefill_concurrency <= s.phase.concurrency
    assert all(s.phase is None for s in slices[active:])
    for s in {slices[0].pod: slices[0], slices[-1].pod: slices[-1]}.values():
        assert decode_slice(encode_slice(s)) == s  # what travels to the pod
    if isinstance(phase, FixedSchedulePhase):  # entry k goes to exactly one pod
        owners = [[s.pod for s in slices[:active] if k % s.entry_stride == s.entry_offset] for k in range(3 * active)]
        assert all(len(o) == 1 for o in owners)
    assert [s.seed for s in slices] == [pod_seed(seed, p) for p in range(pods)]
    if isinstance(phase, ConstantPhase) and phase.rate_ramp is None:  # staggered: one arrival every 1/rate
        arrivals = sorted(s.offset_s + j / s.rate for s in slices[:active] if s.rate for j in range(3))
        assert all(math.isclose(t, n / phase.rate, rel_tol=1e-9, abs_tol=1e-12) for n, t in enumerate(arrivals))
    else:
        assert all(s.offset_s == 0 for s in slices)


@given(whole=st.integers(0, 10**9), parts=st.integers(1, 5000))
def test_share_gives_the_remainder_to_the_first_parts(whole: int, parts: int) -> None:
    got = [share(whole, parts, i) for i in range(parts)]
    assert sum(got) == whole and max(got) - min(got) <= 1 and got == sorted(got, reverse=True)


def test_a_user_keeps_the_plan_pace_and_pods_beyond_the_budget_idle() -> None:
    slices = slice_phase(UserCentricPhase(rate=10.0, users=5, requests=12), 8, seed=7)
    assert [s.users for s in slices] == [1, 1, 1, 1, 1, 0, 0, 0]
    assert [s.requests for s in slices] == [3, 3, 2, 2, 2, 0, 0, 0]
    assert all(s.phase is not None and s.phase.users / s.phase.rate == pytest.approx(0.5) for s in slices[:5])
    assert [s.phase for s in slices[5:]] == [None] * 3 and len({s.seed for s in slices}) == 8


def test_slice_phases_gives_each_pod_every_phase_and_rejects_no_pods() -> None:
    plan = [ConcurrencyPhase(name="warmup", concurrency=2, requests=3), ConstantPhase(rate=300.0, duration=10)]
    per_pod = slice_phases(plan, 3, seed=1)
    assert [[s.requests for s in pod] for pod in per_pod] == [[2, None], [1, None], [0, None]]
    assert [pod[1].rate for pod in per_pod] == [100.0, 100.0, 100.0]
    assert per_pod[2][0].phase is None and per_pod[2][1].phase is not None
    assert pod_seed(None, 3) is None and pod_seed(1, 0) != pod_seed(1, 1) == pod_seed(1, 1)
    with pytest.raises(ValueError, match="pods: at least 1"):
        slice_phase(plan[0], 0)
