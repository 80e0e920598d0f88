"""The `pods` channel of a sharded run (pod DEALER -> controller ROUTER): each worker pod issues
its own workers' credits from its slice of the plan and reports only counters, so the
controller's cost is per pod and per report, never per request (docs/scale.md).

A pod says `PodHello` once; when a phase starts the controller sends every pod a
`PodPhaseStart` with its slice; the pod sends a `PodReport` now and then while the phase runs
and a final one (`final=True`) when its share is settled; `PodCancel` stops the pods early.
"""

from __future__ import annotations

import msgspec

from aiperf.messages.base import Message, Phase


class PodCounts(msgspec.Struct, frozen=True, kw_only=True):
    """A pod's credits of one phase so far: `issued` to its workers, of which `ok`, `failed`,
    `cancelled` came back, `lost` were written off and `in_flight` are still out; `sent`: of
    those that came back, how many had their request sent. Once a pod's phase is over,
    `issued == ok + failed + cancelled + lost` and `in_flight == 0`."""

    issued: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    lost: int = 0
    in_flight: int = 0
    sent: int = 0


class PodHello(Message, frozen=True, kw_only=True):
    """Pod -> controller: pod `pod_id` (its DEALER identity) is ready, with `workers` workers."""

    pod_id: str
    workers: int


class PodReport(Message, frozen=True, kw_only=True):
    """Pod -> controller: its counters of phase number `phase_index` (`seq` counts up per pod and
    phase; a lower one than seen is stale). `final`: the pod's share of the phase is settled and
    `counts` is its total."""

    pod_id: str
    phase_index: int
    seq: int
    counts: PodCounts
    final: bool = False


class PodPhaseStart(Message, frozen=True, kw_only=True):
    """Controller -> pod: run phase number `phase_index` (`phase`: its kind) for your slice,
    `slice` (`aiperf.issuing.slices.encode_slice`: the pod's share, None-phase when it has none)."""

    phase_index: int
    phase: Phase
    slice: bytes


class PodCancel(Message, frozen=True, kw_only=True):
    """Controller -> pod: stop issuing; cancel what is in flight and report the totals."""

    reason: str = ""


PodUpstream = PodHello | PodReport
PodDownstream = PodPhaseStart | PodCancel
