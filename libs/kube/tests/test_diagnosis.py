"""The startup-blocker classifier on pod objects as the kubelet and scheduler write them: each
category and its criticality, priority across pods, and a fingerprint that survives a recreated
pod but not a changed blocker."""

from __future__ import annotations

from typing import Any

import pytest

from aiperf.kube.diagnosis import Blocker, Category, classify, describe, is_capacity_shortage, pod_blockers

IMAGE = "registry.example/aiperf/worker:1.0"


def pod(name: str = "aiperf-run-workers-0-0-abcde", *, role: str = "workers", containers: list[dict[str, Any]] | None = None,
        init: list[dict[str, Any]] | None = None, scheduled: dict[str, Any] | None = None,
        deleting: bool = False) -> dict[str, Any]:
    """A JobSet pod with these container statuses and PodScheduled condition."""
    meta: dict[str, Any] = {"name": name, "labels": {"jobset.sigs.k8s.io/replicatedjob-name": role}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {"phase": "Pending", "containerStatuses": containers or []}
    if init is not None:
        status["initContainerStatuses"] = init
    if scheduled is not None:
        status["conditions"] = [{"type": "PodScheduled", **scheduled}]
    return {"metadata": meta, "spec": {"containers": [{"name": "worker-0", "image": IMAGE}]}, "status": status}


def waiting(reason: str, message: str = "", name: str = "worker-0", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "state": {"waiting": {"reason": reason, "message": message}}, **extra}


def terminated(code: int, reason: str = "Error", name: str = "worker-0") -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "state": {"terminated": {"exitCode": code, "reason": reason}}}


def unschedulable(message: str, reason: str = "Unschedulable") -> dict[str, Any]:
    return {"status": "False", "reason": reason, "message": message}


@pytest.mark.parametrize(("statuses", "category", "reason", "critical"), [
    ([waiting("ErrImagePull", 'failed to pull image "x": not found')], Category.IMAGE_PULL, "ErrImagePull", True),
    ([waiting("ImagePullBackOff", 'Back-off pulling image "x"')], Category.IMAGE_PULL, "ImagePullBackOff", True),
    ([waiting("InvalidImageName")], Category.IMAGE_PULL, "InvalidImageName", True),
    ([waiting("ErrImageNeverPull")], Category.IMAGE_PULL, "ErrImageNeverPull", True),
    ([waiting("CreateContainerConfigError", 'secret "hf" not found')], Category.CONTAINER_CONFIG,
     "CreateContainerConfigError", True),
    ([waiting("CreateContainerError")], Category.CONTAINER_CONFIG, "CreateContainerError", True),
    ([waiting("RunContainerError")], Category.CONTAINER_CONFIG, "RunContainerError", True),
    ([terminated(128, "StartError")], Category.CONTAINER_CONFIG, "StartError", True),
    ([waiting("CrashLoopBackOff")], Category.CRASH_LOOP, "CrashLoopBackOff", True),
    ([terminated(2)], Category.CRASH_LOOP, "Error", True),
    ([terminated(137, "OOMKilled")], Category.CRASH_LOOP, "OOMKilled", True),
])
def test_container_states(statuses: list[dict[str, Any]], category: Category, reason: str, critical: bool) -> None:
    blocker = classify([pod(containers=statuses)])
    assert blocker is not None
    assert (blocker.category, blocker.reason, blocker.critical, blocker.container) == (category, reason, critical,
                                                                                       "worker-0")


@pytest.mark.parametrize("statuses", [
    [],
    [waiting("ContainerCreating")],
    [waiting("PodInitializing")],
    [{"name": "worker-0", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
    [terminated(0, "Completed")],
])
def test_pods_on_their_way_or_healthy_are_not_blocked(statuses: list[dict[str, Any]]) -> None:
    assert classify([pod(containers=statuses)]) is None


@pytest.mark.parametrize(("message", "critical"), [
    ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
     "available: 3 Preemption is not helpful for scheduling.", True),
    ("0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: bench}.", True),
    ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No "
     "preemption victims found for incoming pod.", False),
    ("0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.", False),
    ("0/1 nodes are available: 1 Too many pods.", False),
    ("0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims.", False),
    ("0/2 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.", False),
    ("0/2 nodes are available: 2 node(s) were unschedulable.", False),
])
def test_unschedulable_is_critical_unless_capacity(message: str, critical: bool) -> None:
    blocker = classify([pod(scheduled=unschedulable(message))])
    assert blocker is not None and blocker.reason == "Unschedulable" and blocker.container is None
    assert blocker.critical is critical and is_capacity_shortage(message) is not critical
    assert blocker.category is (Category.UNSCHEDULABLE if critical else Category.SCHEDULING_DELAYED)


def test_scheduling_gates_are_retryable() -> None:
    blocker = classify([pod(scheduled=unschedulable("Scheduling is blocked due to non-empty scheduling gates",
                                                    reason="SchedulingGated"))])
    assert blocker is not None and blocker.category is Category.SCHEDULING_DELAYED and not blocker.critical


def test_init_containers_are_checked() -> None:
    blocker = classify([pod(init=[waiting("ImagePullBackOff", name="fetch")])])
    assert blocker is not None and blocker.container == "fetch" and blocker.category is Category.IMAGE_PULL


def test_a_pod_being_deleted_is_skipped() -> None:
    assert classify([pod(containers=[waiting("ImagePullBackOff")], deleting=True)]) is None


def test_the_highest_priority_blocker_wins_across_pods() -> None:
    pods = [pod("aiperf-run-workers-0-0-a", scheduled=unschedulable("0/1 nodes are available: 1 Insufficient cpu.")),
            pod("aiperf-run-workers-0-1-b", containers=[terminated(1)]),
            pod("aiperf-run-controller-0-0-c", role="controller", containers=[waiting("ImagePullBackOff")])]
    blocker = classify(pods)
    assert blocker is not None and (blocker.reason, blocker.pod) == ("ImagePullBackOff", "aiperf-run-controller-0-0-c")
    assert [b.category for b in pod_blockers(pods[0])] == [Category.SCHEDULING_DELAYED]


def test_crash_loop_names_the_last_exit_code() -> None:
    status = waiting("CrashLoopBackOff", "back-off 10s restarting failed container",
                     lastState={"terminated": {"exitCode": 3, "reason": "Error"}})
    blocker = classify([pod(containers=[status])])
    assert blocker is not None and blocker.message.startswith("last exit code 3 (Error); back-off")


def _only(p: dict[str, Any]) -> Blocker:
    blocker = classify([p])
    assert blocker is not None
    return blocker


def test_the_fingerprint_survives_a_recreated_pod_and_the_pull_back_off_cycle() -> None:
    first = _only(pod("aiperf-run-workers-0-0-aaaaa", containers=[
        waiting("ErrImagePull", f'failed to pull image "{IMAGE}": rpc error: not found')]))
    again = _only(pod("aiperf-run-workers-0-0-bbbbb", containers=[
        waiting("ImagePullBackOff", f'Back-off pulling image "{IMAGE}"')]))
    assert first.fingerprint == again.fingerprint and len(first.fingerprint) == 16
    crash = [_only(pod(f"aiperf-run-workers-0-0-{s}", containers=[
        waiting("CrashLoopBackOff", f"back-off {d} restarting failed container=worker-0 pod=aiperf-run-workers-0-0-{s}")]))
        for s, d in (("aaaaa", "10s"), ("bbbbb", "5m0s"))]
    assert crash[0].fingerprint == crash[1].fingerprint
    nodes = [_only(pod(scheduled=unschedulable(f"0/{n} nodes are available: {n} node(s) didn't match Pod's node "
                                                  "affinity/selector."))) for n in (3, 5)]
    assert nodes[0].fingerprint == nodes[1].fingerprint


def test_the_fingerprint_changes_with_the_blocker() -> None:
    base = _only(pod(containers=[waiting("ImagePullBackOff")]))
    others = [
        _only(pod(containers=[{**waiting("ImagePullBackOff"), "image": "registry.example/aiperf/worker:2.0"}])),
        _only(pod(containers=[waiting("ImagePullBackOff", name="worker-1")])),
        _only(pod(role="controller", containers=[waiting("ImagePullBackOff")])),
        _only(pod(containers=[waiting("CreateContainerConfigError", 'secret "hf" not found')])),
    ]
    assert len({base.fingerprint, *(o.fingerprint for o in others)}) == 5
    config = [_only(pod(containers=[waiting("CreateContainerConfigError", f'secret "{s}" not found')]))
              for s in ("hf", "api-key")]
    assert config[0].fingerprint != config[1].fingerprint


def test_status_form_and_one_line_description() -> None:
    blocker = _only(pod(containers=[waiting("ImagePullBackOff", "Back-off pulling image\n  \"x\"")]))
    assert blocker.as_status("2026-01-01T00:00:00Z") == {
        "reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"', "pod": "aiperf-run-workers-0-0-abcde",
        "container": "worker-0", "fingerprint": blocker.fingerprint, "firstObservedTime": "2026-01-01T00:00:00Z",
        "critical": True}
    assert describe(blocker.as_status(None)) == "ImagePullBackOff in pod aiperf-run-workers-0-0-abcde container worker-0"
    unscheduled = _only(pod(scheduled=unschedulable("0/1 nodes are available: 1 Insufficient cpu.")))
    assert describe(unscheduled.as_status(None)) == "Unschedulable in pod aiperf-run-workers-0-0-abcde"
