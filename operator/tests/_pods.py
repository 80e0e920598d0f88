"""Test helpers for startup diagnosis: an injected wall clock, pods of run `run`'s JobSet as the
Job controller would create them, kubelet states, and views of what the operator wrote
(imported as a top-level test module)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from _harness import NS, cr, jobset

from aiperf.kube.names import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from aiperf.operator.startup import JOBSET_UID_LABEL
from aiperf.testing.fake_kube import FakeKube

IMAGE = "registry.example/aiperf/worker:missing"


class Clock:
    """The reconciler's wall clock, moved by the test (read from kopf's thread)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def add_pod(kube: FakeKube, pod: str, *, role: str = "workers", container: str = "worker-0") -> None:
    """A pod of run `run`'s JobSet, as the Job controller would create it."""
    js = jobset(kube)
    assert js is not None
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        JOBSET_NAME_LABEL: js["metadata"]["name"], JOBSET_UID_LABEL: js["metadata"]["uid"],
        REPLICATED_JOB_LABEL: role, "app.kubernetes.io/name": "aiperf"}},
        "spec": {"containers": [{"name": container, "image": IMAGE}]}})


def pull_fails(kube: FakeKube, pod: str, reason: str = "ImagePullBackOff") -> None:
    """The kubelet cannot pull container worker-0's image (`reason`: ErrImagePull or ImagePullBackOff)."""
    kube.pods.set_container_state(NS, pod, "worker-0", {"waiting": {
        "reason": reason, "message": f'Back-off pulling image "{IMAGE}"'}})


def issue(kube: FakeKube) -> dict[str, Any]:
    """The run's status.startupIssue (empty when none)."""
    return (cr(kube).get("status") or {}).get("startupIssue") or {}


async def diagnoses(kube: FakeKube, count: int) -> None:
    """Wait until the operator listed the run's pods `count` more times (one diagnosis each)."""
    def listed() -> int:
        return len(kube.requests_for("GET", f"/api/v1/namespaces/{NS}/pods"))
    start = listed()
    await kube.wait_until(lambda: listed() >= start + count)


def warnings(kube: FakeKube) -> list[dict[str, Any]]:
    """The StartupBlocked Events on the run's AIPerfJob."""
    return [e for _, e in kube.store.all_objects() if e.get("kind") == "Event" and e.get("reason") == "StartupBlocked"]
