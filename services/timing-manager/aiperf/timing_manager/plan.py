"""The load plan: one `PhasePlan` per phase (warmup, then profiling), from `ProfileOptions`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aiperf.config import ProfileOptions, RateMode
from aiperf.messages import Phase

Mode = Literal["closed", "rate", "fixed"]


@dataclass(frozen=True, kw_only=True)
class PhasePlan:
    """How one phase issues credits.

    - `closed`: `concurrency` conversations run at once, each turn issued when the previous
      one returned; stops after `count` credits or `duration_s`.
    - `rate`: first turns arrive at `rate` per second (`rate_mode`: constant, poisson, or
      gamma with shape `smoothness`), at most `concurrency` in flight when set.
    - `fixed`: first turn of conversation i at its trace timestamp (relative to the earliest).

    `count` None means no credit limit (duration or end of schedule stops the phase).
    `cancel_rate_pct` of the credits (seeded) ask the worker to cancel `cancel_delay_s` after
    sending. `seed` None draws a fresh seed.
    """

    phase: Phase
    mode: Mode
    count: int | None
    concurrency: int | None = None
    rate: float | None = None
    rate_mode: RateMode = "poisson"
    smoothness: float = 1.0
    duration_s: float | None = None
    grace_s: float = 0.0
    seed: int | None = None
    cancel_rate_pct: float = 0.0
    cancel_delay_s: float = 0.0

    @classmethod
    def closed_loop(cls, *, count: int | None, concurrency: int = 1, phase: Phase = Phase.PROFILING,
                    duration_s: float | None = None, grace_s: float = 0.0) -> PhasePlan:
        """A closed loop of `concurrency` (convenience for tests and warmup)."""
        return cls(phase=phase, mode="closed", count=count, concurrency=concurrency,
                   duration_s=duration_s, grace_s=grace_s)


def build_plans(profile: ProfileOptions) -> list[PhasePlan]:
    """Warmup (when `warmup_request_count` > 0: closed loop at `concurrency` or 1) then
    profiling, following the flag semantics of `ProfileOptions`."""
    plans: list[PhasePlan] = []
    if profile.warmup_request_count > 0:
        plans.append(PhasePlan.closed_loop(count=profile.warmup_request_count,
                                           concurrency=profile.concurrency or 1, phase=Phase.WARMUP))
    mode: Mode = "fixed" if profile.fixed_schedule else "rate" if profile.request_rate else "closed"
    concurrency = profile.concurrency if mode != "closed" else (profile.concurrency or 1)
    plans.append(PhasePlan(
        phase=Phase.PROFILING, mode=mode, count=profile.effective_request_count,
        concurrency=concurrency, rate=profile.request_rate, rate_mode=profile.request_rate_mode,
        smoothness=profile.arrival_smoothness, duration_s=profile.benchmark_duration,
        grace_s=profile.benchmark_grace_period, seed=profile.random_seed,
        cancel_rate_pct=profile.request_cancellation_rate,
        cancel_delay_s=profile.request_cancellation_delay))
    return plans
