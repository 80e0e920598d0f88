"""The load plan split into per-pod slices, for a run whose credits are issued by each worker
pod for its own workers (docs/scale.md, "Shard the credit issuer per worker pod").

Contract of `slice_phase(phase, pods)` (and `slice_phases`, the same per phase):

- It returns `pods` `PhaseSlice`s, pod 0 first; deterministic (no randomness, no dataset).
- Every integer budget of the phase (`requests`, `sessions`, `concurrency`,
  `prefill_concurrency`, a user-centric phase's `users`) is divided among the phase's *active*
  pods so the shares add up exactly to the whole: each active pod gets `whole // active`, the
  first `whole % active` one more. `active` is the number of pods, capped by the smallest of
  those budgets the phase sets, so every active pod gets at least 1 of each and may run the
  phase on its own; the other pods get 0 of everything and do nothing in the phase
  (`PhaseSlice.phase` is None).
- A rate (`rate`) is divided evenly among the active pods (a user-centric phase: in proportion
  to each pod's users, so each user keeps the whole plan's pace); the shares add up to the
  whole within floating-point rounding. A Poisson process split this way is the same process;
  a constant or gamma one is the superposition of the pods' processes.
- Durations, grace periods, ramp durations, cancellation and the phase's kind (warmup or
  profiling) are unchanged. A ramp acts per pod: each pod ramps its own share from 1 (its
  concurrency) or from a tenth (its rate), so a ramped concurrency starts at `active`, not 1.
- A fixed schedule's entries are partitioned: in the schedule's send order (the trace window
  sorted by timestamp), entry k goes to pod `k % active` (`PhaseSlice.entry_offset`,
  `entry_stride`); each pod keeps the whole schedule's zero, so the union of the pods' sends
  is the whole schedule (`aiperf.issuing.pod.slice_conversations`).
- A constant rate (no ramp) is staggered: active pod k starts `offset_s = k / rate` after
  the phase start, so the pods' arrivals together are exactly `1 / rate` apart, not
  `active` at once (each pod's arrivals are `active / rate` apart).
- `PhaseSlice.seed` is the pod's seed, derived from the run's seed and the pod index
  (`pod_seed`; None stays None: fresh randomness), so pods do not draw the same arrivals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec

from aiperf.config import ConstantPhase, FixedSchedulePhase, Phase, RatePhase, UserCentricPhase


class PhaseSlice(msgspec.Struct, frozen=True, kw_only=True):
    """Pod `pod`'s share of one phase (see the module's contract). `phase` is the phase this
    pod runs (its budgets replaced by its shares), or None when the pod has nothing to do in
    it; the share fields say the same in numbers (0 for a pod that does nothing; None where
    the plan sets no such budget). A fixed schedule's pod sends entries `entry_offset`,
    `entry_offset + entry_stride`, ... of the schedule's send order. The pod starts the phase
    `offset_s` seconds after it is told to (a staggered constant rate)."""

    pod: int
    pods: int
    active: int
    phase: Phase | None
    requests: int | None = None
    sessions: int | None = None
    concurrency: int | None = None
    prefill_concurrency: int | None = None
    users: int | None = None
    rate: float | None = None
    entry_offset: int = 0
    entry_stride: int = 1
    seed: int | None = None
    offset_s: float = 0.0


def share(whole: int, parts: int, index: int) -> int:
    """Part `index` of `whole` divided into `parts` integer parts: `whole // parts`, one more
    for the first `whole % parts`; 0 for an index beyond `parts`. The parts sum to `whole`."""
    if index >= parts:
        return 0
    return whole // parts + (1 if index < whole % parts else 0)


def pod_seed(seed: int | None, pod: int) -> int | None:
    """Pod `pod`'s seed: a 63-bit number fixed by the run's `seed` and the pod index (None:
    None, fresh randomness everywhere)."""
    if seed is None:
        return None
    digest = hashlib.blake2b(f"{seed}:pod:{pod}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _int_budgets(phase: Phase) -> dict[str, int]:
    """The integer budgets the phase sets (the ones that are divided)."""
    names = ["requests", "sessions", "concurrency", "prefill_concurrency"]
    if isinstance(phase, UserCentricPhase):
        names.append("users")
    budgets = {name: getattr(phase, name) for name in names}
    return {name: value for name, value in budgets.items() if value is not None}


def active_pods(phase: Phase, pods: int) -> int:
    """How many of `pods` take part in `phase`: `pods`, capped by its smallest integer budget."""
    if pods < 1:
        raise ValueError(f"pods: at least 1, got {pods}")
    return min([pods, *_int_budgets(phase).values()])


def _stagger_s(phase: Phase, pod: int, active: int) -> float:
    """When active pod `pod` starts a constant-rate phase: `pod / rate` (0 otherwise)."""
    if isinstance(phase, ConstantPhase) and phase.rate_ramp is None and pod < active:
        return pod / phase.rate
    return 0.0


def slice_phase(phase: Phase, pods: int, *, seed: int | None = None) -> list[PhaseSlice]:
    """`phase` divided among `pods` pods (the module's contract); `seed` is the run's seed."""
    active = active_pods(phase, pods)
    budgets = _int_budgets(phase)
    out: list[PhaseSlice] = []
    for pod in range(pods):
        shares: dict[str, int] = {name: share(whole, active, pod) for name, whole in budgets.items()}
        rate: float | None = None
        if isinstance(phase, RatePhase):
            if isinstance(phase, UserCentricPhase):
                rate = phase.rate * shares["users"] / phase.users
            else:
                rate = phase.rate / active if pod < active else 0.0
        fields: dict[str, object] = {name: shares.get(name) for name in
                                     ("requests", "sessions", "concurrency", "prefill_concurrency", "users")}
        own: Phase | None = None
        if pod < active:
            replace: dict[str, object] = dict(shares)
            if rate is not None:
                replace["rate"] = rate
            own = msgspec.structs.replace(phase, **replace)
        out.append(PhaseSlice(pod=pod, pods=pods, active=active, phase=own, rate=rate,
                              entry_offset=pod if isinstance(phase, FixedSchedulePhase) else 0,
                              entry_stride=active if isinstance(phase, FixedSchedulePhase) else 1,
                              seed=pod_seed(seed, pod), offset_s=_stagger_s(phase, pod, active),
                              **fields))  # type: ignore[arg-type]
    return out


def slice_phases(phases: Sequence[Phase], pods: int, *, seed: int | None = None) -> list[list[PhaseSlice]]:
    """Every phase divided among `pods` pods: `result[pod][i]` is pod `pod`'s slice of
    `phases[i]` (`slice_phase`)."""
    per_phase = [slice_phase(phase, pods, seed=seed) for phase in phases]
    return [[slices[pod] for slices in per_phase] for pod in range(pods)]


def encode_slice(piece: PhaseSlice) -> bytes:
    """`piece` as the bytes a `PodPhaseStart` carries (JSON)."""
    return msgspec.json.encode(piece)


def decode_slice(data: bytes) -> PhaseSlice:
    """The `PhaseSlice` of `encode_slice`; raises `msgspec.ValidationError` for other bytes."""
    return msgspec.json.decode(data, type=PhaseSlice)


__all__ = ["PhaseSlice", "active_pods", "decode_slice", "encode_slice", "pod_seed", "share", "slice_phase",
           "slice_phases"]
