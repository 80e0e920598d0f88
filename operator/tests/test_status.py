"""The pure status rules: forward-only phases, condition merging, the fenced JSON Patch, the
phase a JobSet calls for, and the deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiperf.crd.model import JobPhase
from aiperf.operator.status import (
    Cond,
    StatusChange,
    deadline,
    forward,
    merge_conditions,
    observe_jobset,
    status_patch,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def cr(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "r", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                                         "generation": 3}, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def jobset(*, ready: int = 0, replicas: tuple[int, ...] = (1, 2), condition: str | None = None,
           suspend: bool = False) -> dict[str, Any]:
    names = [f"j{i}" for i in range(len(replicas))]
    status: dict[str, Any] = {"replicatedJobsStatus": [{"name": n, "ready": min(ready, r), "succeeded": 0}
                                                       for n, r in zip(names, replicas, strict=True)]}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True", "message": "3 jobs failed"}]
    return {"spec": {"suspend": suspend, "replicatedJobs": [{"name": n, "replicas": r} for n, r in
                                                            zip(names, replicas, strict=True)]}, "status": status}


def test_phases_only_move_forward_and_terminal_ones_are_final() -> None:
    assert forward(None, JobPhase.PENDING) is JobPhase.PENDING
    assert forward(JobPhase.PENDING, JobPhase.RUNNING) is JobPhase.RUNNING
    assert forward(JobPhase.RUNNING, JobPhase.INITIALIZING) is None
    assert forward(JobPhase.RUNNING, JobPhase.RUNNING) is None
    assert forward(JobPhase.INITIALIZING, JobPhase.FAILED) is JobPhase.FAILED
    for done in (JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.CANCELLED):
        assert forward(done, JobPhase.RUNNING) is None and forward(done, JobPhase.FAILED) is None


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    old = [{"type": "A", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
           {"type": "B", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    merged = merge_conditions(old, [Cond("A", True, "Still", "m"), Cond("B", True, "Now", ""),
                                    Cond("C", None, "New")], now=NOW, generation=3)
    assert [c["type"] for c in merged] == ["A", "B", "C"]
    assert merged[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z" and merged[0]["reason"] == "Still"
    assert merged[1]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert merged[2]["status"] == "Unknown" and merged[2]["observedGeneration"] == 3


def test_the_patch_is_fenced_on_uid_resource_version_and_phase() -> None:
    ops = status_patch(cr({"phase": "Running", "subPhase": "profiling"}),
                       StatusChange(values={"phase": "Completed"}, remove=("subPhase", "currentPhase")), now=NOW)
    assert ops[:3] == [{"op": "test", "path": "/metadata/uid", "value": "u1"},
                       {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                       {"op": "test", "path": "/status/phase", "value": "Running"}]
    assert {"op": "add", "path": "/status/phase", "value": "Completed"} in ops
    assert {"op": "remove", "path": "/status/subPhase"} in ops
    assert {"op": "remove", "path": "/status/currentPhase"} not in ops  # absent: a remove would fail


def test_a_cr_without_status_gets_one_and_no_phase_test() -> None:
    ops = status_patch(cr(), StatusChange(values={"phase": "Pending"}), now=NOW)
    assert {"op": "add", "path": "/status", "value": {}} in ops
    assert all(op["path"] != "/status/phase" or op["op"] == "add" for op in ops)


def test_the_jobset_decides_the_phase() -> None:
    starting = observe_jobset(cr({"phase": "Initializing"}), jobset(ready=1), now=NOW)
    assert starting is not None and starting.phase is None
    assert starting.conditions[0].message.startswith("2 of 3 pods ready") and starting.conditions[0].ok is False
    ready = observe_jobset(cr({"phase": "Initializing"}), jobset(ready=2), now=NOW)  # pods are not workers yet
    assert ready is not None and ready.phase is None and ready.conditions[0].reason == "WaitingForController"
    profiling = observe_jobset(cr({"phase": "Initializing", "subPhase": "profiling", "phases": {
        "profiling": {"phaseName": "profiling", "phaseKind": "profiling", "phaseIndex": 0}}}), jobset(ready=1), now=NOW)
    assert profiling is not None and profiling.phase is JobPhase.RUNNING
    failed = observe_jobset(cr({"phase": "Running"}), jobset(condition="Failed"), now=NOW)
    assert failed is not None and failed.phase is JobPhase.FAILED and "subPhase" in failed.remove
    assert failed.conditions[0].message == "3 jobs failed"
    done = observe_jobset(cr({"phase": "Running"}), jobset(ready=2, condition="Completed"), now=NOW)
    assert done is not None and done.phase is JobPhase.COMPLETED
    assert observe_jobset(cr({"phase": "Completed"}), jobset(condition="Failed"), now=NOW) is None


def test_a_warmup_kind_phase_keeps_the_run_initializing_whatever_its_name() -> None:
    # Issue 23, item 8: subPhase is `profiling` for every benchmark phase; phaseKind decides.
    warmup = {"phase": "Initializing", "subPhase": "profiling", "currentPhase": "cache_prime", "phases": {
        "cache_prime": {"phaseName": "cache_prime", "phaseKind": "warmup", "phaseIndex": 0}}}
    change = observe_jobset(cr(warmup), jobset(ready=2), now=NOW)
    assert change is None or change.phase is None
    after = {**warmup, "subPhase": "processing"}
    moved = observe_jobset(cr(after), jobset(ready=2), now=NOW)
    assert moved is not None and moved.phase is JobPhase.RUNNING


def test_workers_ready_follows_the_controllers_dispatch_ready_workers() -> None:
    workers = {"ready": 4, "total": 4, "dispatchable": 3, "routerConnected": 3, "readyPods": 2, "totalPods": 2}
    change = observe_jobset(cr({"phase": "Running", "workers": workers}), jobset(ready=2), now=NOW)
    assert change is not None
    cond = change.conditions[0]
    assert (cond.ok, cond.reason) == (False, "WorkersConnecting")
    assert cond.message == "3 of 4 workers ready to dispatch (2 of 2 worker pods ready)"
    change = observe_jobset(cr({"phase": "Running", "workers": {**workers, "dispatchable": 4}}), jobset(ready=2),
                            now=NOW)
    assert change is not None and change.conditions[0].ok is True


def test_a_suspended_jobset_is_cancelled_only_when_the_cr_asks() -> None:
    cancelled = observe_jobset(cr({"phase": "Running"}, cancel=True), jobset(suspend=True), now=NOW)
    assert cancelled is not None and cancelled.phase is JobPhase.CANCELLED
    queued = observe_jobset(cr({"phase": "Initializing"}), jobset(suspend=True), now=NOW)
    assert queued is None or queued.phase is None  # suspended, no queue label: not a cancel, not Queued


def test_an_unchanged_view_writes_nothing() -> None:
    workers = {"total": 2, "dispatchable": 2, "readyPods": 2, "totalPods": 2}
    status = {"phase": "Running", "workers": workers, "conditions": [{
        "type": "WorkersReady", "status": "True",
        "message": "2 of 2 workers ready to dispatch (2 of 2 worker pods ready)"}]}
    assert observe_jobset(cr(status), jobset(ready=2), now=NOW) is None


def test_the_deadline_counts_from_the_start_time() -> None:
    assert deadline(cr({"startTime": "2026-01-02T03:04:05Z"}, timeoutSeconds=60)) == NOW + timedelta(seconds=60)
    assert deadline(cr({"startTime": "2026-01-02T03:04:05Z"})) is None
    assert deadline(cr({}, timeoutSeconds=60)) is None
