"""The operator's part of an AIPerfJob's status, computed from what it observes (pure).

`status.phase` only moves forward: Pending -> Initializing -> Running -> one of Completed,
Failed, Cancelled, and a terminal phase is final; Queued stands beside Initializing while a
queue (Kueue: the JobSet carries `kueue.x-k8s.io/queue-name`) holds the JobSet suspended
without `spec.cancel` (condition `Queued` True `SuspendedByQueue`, False `Admitted` after). Conditions are a map by `type`; a condition's
`lastTransitionTime` changes only when its `status` does. Every write is a JSON Patch that
first tests the CR's UID and resourceVersion (and its phase, when it has one), so a write
computed from a stale read is refused by the API server instead of overwriting a newer one
(`status_patch`).

Conditions written here: `ConfigValid`, `ResourcesCreated`, `WorkersReady`, `Queued`, `Cancelled`,
`TimedOut`, `Succeeded` (and `StartupFailed`, by `aiperf.operator.startup`; `ResultsStored`, by
the reconciler at the run's end).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aiperf.config import PhaseKind
from aiperf.crd.model import JobPhase
from aiperf.kubeapi import Obj
from aiperf.kuberun.direct import JobState, jobset_state
from aiperf.kuberun.jobs import phase_of
from aiperf.messages import SystemState

TERMINAL = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.CANCELLED})
_RANK = {JobPhase.PENDING: 0, JobPhase.QUEUED: 1, JobPhase.INITIALIZING: 1, JobPhase.RUNNING: 2}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that hands a JobSet to a Kueue LocalQueue (Kueue then creates it suspended)."""
RUNNING_SUBPHASES = frozenset({SystemState.PROFILING, SystemState.PROCESSING, SystemState.EXPORTING,
                               SystemState.STOPPING, SystemState.DONE})
"""Controller states (`status.subPhase`) that mean the benchmark itself is under way."""
AFTER_PROFILING = RUNNING_SUBPHASES - {SystemState.PROFILING}
"""Controller states past the benchmark phases (the run was Running whatever its phases were)."""
CONTROLLER_KEYS = ("subPhase", "currentPhase")
"""Controller-owned keys cleared when the operator stamps a terminal phase."""


def timestamp(now: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, whole seconds (what Kubernetes writes)."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    """A Kubernetes timestamp back to an aware datetime (None when absent or malformed)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def cancel_requested(cr: Mapping[str, Any]) -> bool:
    """True when the CR's `spec.cancel` is set."""
    return (cr.get("spec") or {}).get("cancel") is True


def condition_of(cr: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The CR's condition of `type_`, if any."""
    for cond in (cr.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(cr: Mapping[str, Any], type_: str) -> bool:
    """True when the CR's condition `type_` has status True."""
    cond = condition_of(cr, type_)
    return cond is not None and cond.get("status") == "True"


@dataclass(frozen=True)
class Cond:
    """A condition to set: `ok` True/False/None (Unknown), a CamelCase reason, a message."""

    type: str
    ok: bool | None
    reason: str
    message: str = ""


@dataclass(frozen=True)
class StatusChange:
    """Status keys to set, conditions to merge, status keys to remove, and `expect`: extra
    preconditions, JSON Pointer -> value, each sent as a JSON Patch `test`."""

    values: Mapping[str, Any] = field(default_factory=dict)
    conditions: Sequence[Cond] = ()
    remove: Sequence[str] = ()
    expect: Mapping[str, Any] = field(default_factory=dict)

    @property
    def phase(self) -> JobPhase | None:
        """The phase this change writes, if any."""
        value = self.values.get("phase")
        return JobPhase(value) if value else None


def forward(current: JobPhase | None, wanted: JobPhase) -> JobPhase | None:
    """The phase to write when `wanted` is observed while in `current`: None when nothing changes
    (terminal phases are final; a non-terminal phase never moves back, but Initializing may
    become Queued when a queue holds the JobSet, and Queued moves on once it is admitted)."""
    if current in TERMINAL or current == wanted:
        return None
    if wanted in TERMINAL or current is None:
        return wanted
    if wanted == JobPhase.QUEUED:  # held by a queue before any pod ran (Kueue suspends at creation)
        return wanted if current in (JobPhase.PENDING, JobPhase.INITIALIZING) else None
    if current == JobPhase.QUEUED:  # admitted
        return wanted if _RANK[wanted] >= _RANK[JobPhase.INITIALIZING] else None
    return wanted if _RANK[wanted] > _RANK[current] else None


def merge_conditions(existing: Sequence[Mapping[str, Any]], updates: Sequence[Cond], *, now: datetime,
                     generation: int | None) -> list[Obj]:
    """`existing` with `updates` applied by type (order kept, new types appended)."""
    out = [dict(c) for c in existing]
    for upd in updates:
        status = "Unknown" if upd.ok is None else ("True" if upd.ok else "False")
        new: Obj = {"type": upd.type, "status": status, "reason": upd.reason, "message": upd.message,
                    "lastTransitionTime": timestamp(now)}
        if generation is not None:
            new["observedGeneration"] = generation
        for i, old in enumerate(out):
            if old.get("type") == upd.type:
                if old.get("status") == status:
                    new["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
                out[i] = new
                break
        else:
            out.append(new)
    return out


def status_patch(cr: Mapping[str, Any], change: StatusChange, *, now: datetime) -> list[Obj]:
    """The fenced JSON Patch applying `change` to the CR as read (`cr`): tests on metadata.uid,
    metadata.resourceVersion, (when set) status.phase and `change.expect`, then one `add` per key."""
    meta, status = cr["metadata"], cr.get("status")
    ops: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
                      {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}]
    ops += [{"op": "test", "path": pointer, "value": value} for pointer, value in change.expect.items()]
    if status is None:
        ops.append({"op": "add", "path": "/status", "value": {}})
        status = {}
    elif "phase" in status:
        ops.append({"op": "test", "path": "/status/phase", "value": status["phase"]})
    for key, value in change.values.items():
        ops.append({"op": "add", "path": f"/status/{key}", "value": value})
    if change.conditions:
        merged = merge_conditions(status.get("conditions") or [], change.conditions, now=now,
                                  generation=meta.get("generation"))
        ops.append({"op": "add", "path": "/status/conditions", "value": merged})
    ops += [{"op": "remove", "path": f"/status/{key}"} for key in change.remove if key in status]
    return ops


def terminal(phase: JobPhase, conditions: Sequence[Cond], *, now: datetime) -> StatusChange:
    """The change that ends a run in `phase`: completion time, `Succeeded`, controller keys gone."""
    done = Cond("Succeeded", phase == JobPhase.COMPLETED, phase.value,
                "the benchmark finished" if phase == JobPhase.COMPLETED else f"the run ended {phase.value}")
    return StatusChange(values={"phase": phase.value, "completionTime": timestamp(now)},
                        conditions=[*conditions, done], remove=CONTROLLER_KEYS)


def pod_counts(jobset: Mapping[str, Any]) -> tuple[int, int]:
    """(ready, expected) jobs of a JobSet (each job runs one pod): ready or succeeded jobs over the
    replicas of every replicated job."""
    expected = sum(int(rj.get("replicas", 1)) for rj in (jobset.get("spec") or {}).get("replicatedJobs") or [])
    ready = sum(int(s.get("ready", 0)) + int(s.get("succeeded", 0))
                for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or [])
    return ready, expected


def _failure_message(jobset: Mapping[str, Any]) -> str:
    for cond in (jobset.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or "the JobSet failed")
    return "the JobSet failed"


def observe_jobset(cr: Mapping[str, Any], jobset: Mapping[str, Any], *, now: datetime) -> StatusChange | None:
    """The change the JobSet's state calls for, or None: Completed/Failed when it finished,
    Cancelled when suspended after `spec.cancel`, Queued while its queue holds it, Running once
    the controller reports the benchmark under way (`benchmark_running`: never during a
    warmup-kind phase), else Initializing; `WorkersReady` follows the controller's
    dispatch-ready workers (`workers_condition`)."""
    current = phase_of(cr)
    if current in TERMINAL:
        return None
    state = jobset_state(dict(jobset))
    ready, expected = pod_counts(jobset)
    if state == JobState.COMPLETED:
        return terminal(JobPhase.COMPLETED, [], now=now)
    if state == JobState.FAILED:
        return terminal(JobPhase.FAILED, [Cond("WorkersReady", False, "JobSetFailed", _failure_message(jobset))],
                        now=now)
    if state == JobState.SUSPENDED and cancel_requested(cr):
        return terminal(JobPhase.CANCELLED, [Cond("Cancelled", True, "Cancelled", "spec.cancel is true")], now=now)
    queue = queue_of(jobset)
    if state == JobState.SUSPENDED and queue is not None and current in (JobPhase.PENDING, JobPhase.INITIALIZING,
                                                                        JobPhase.QUEUED):
        held = Cond("Queued", True, "SuspendedByQueue",
                    f"JobSet {jobset['metadata']['name']} is suspended by its queue {queue} until it admits the run")
        old_held = condition_of(cr, "Queued")
        if current == JobPhase.QUEUED and old_held is not None and old_held.get("message") == held.message:
            return None
        return StatusChange(values={"phase": JobPhase.QUEUED.value}, conditions=[held])
    queued = [Cond("Queued", False, "Admitted", f"admitted by its queue {queue}")] if (
        queue is not None and is_true(cr, "Queued")) else []
    workers = workers_condition(cr, ready, expected)
    wanted = forward(current, JobPhase.RUNNING if benchmark_running(cr) else JobPhase.INITIALIZING)
    old = condition_of(cr, "WorkersReady")
    if wanted is None and not queued and old is not None and old.get("message") == workers.message:
        return None
    values = {"phase": wanted.value} if wanted else {}
    return StatusChange(values=values, conditions=[workers, *queued])


def benchmark_running(cr: Mapping[str, Any]) -> bool:
    """The controller reports the benchmark under way: a state past the benchmark phases, or
    `profiling` once a profiling-kind phase has started (`status.phases.*.phaseKind`; a warmup-kind
    phase, whatever its name, keeps the run Initializing)."""
    status = cr.get("status") or {}
    sub = status.get("subPhase")
    if sub in AFTER_PROFILING:
        return True
    phases = status.get("phases") or {}
    return sub == SystemState.PROFILING and any(
        isinstance(p, Mapping) and p.get("phaseKind") == PhaseKind.PROFILING for p in phases.values())


def took_over(cr: Mapping[str, Any]) -> bool:
    """The controller has pushed its own `status.workers` (`totalPods` marks it)."""
    return ((cr.get("status") or {}).get("workers") or {}).get("totalPods") is not None


def workers_condition(cr: Mapping[str, Any], ready_pods: int, expected_pods: int) -> Cond:
    """`WorkersReady`: from the controller's dispatch-ready workers once it took over
    `status.workers`, before that False with the pods' readiness (ready pods are not yet
    workers that can take credits)."""
    workers = (cr.get("status") or {}).get("workers") or {}
    if took_over(cr):
        total, dispatchable = int(workers.get("total") or 0), int(workers.get("dispatchable") or 0)
        ok = total > 0 and dispatchable >= total
        return Cond("WorkersReady", ok, "WorkersDispatchable" if ok else "WorkersConnecting",
                    f"{dispatchable} of {total} workers ready to dispatch ({workers.get('readyPods', 0)} of "
                    f"{workers.get('totalPods')} worker pods ready)")
    reason = "WaitingForController" if ready_pods >= expected_pods else "PodsStarting"
    return Cond("WorkersReady", False, reason, f"{ready_pods} of {expected_pods} pods ready; the controller "
                "has not counted its workers yet")


def queue_of(jobset: Mapping[str, Any]) -> str | None:
    """The queue a JobSet was handed to (its `QUEUE_LABEL`), if any."""
    return ((jobset.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def deadline(cr: Mapping[str, Any]) -> datetime | None:
    """When the run times out: `status.startTime` + `spec.timeoutSeconds`, None without either."""
    seconds = (cr.get("spec") or {}).get("timeoutSeconds")
    start = parse_time((cr.get("status") or {}).get("startTime"))
    if not seconds or start is None:
        return None
    return start + timedelta(seconds=int(seconds))
