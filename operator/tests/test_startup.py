"""Startup-blocker diagnosis end to end with real kopf against the fake API server, on an
injected clock (thresholds are the production defaults; the test moves time, never sleeps):
an image that cannot be pulled is recorded in status.startupIssue, warned about, then fails the
run and its JobSet goes; a capacity shortage never fails it; a restarted operator keeps the
first sighting across a recreated pod; a blocker that clears goes from the status."""

from __future__ import annotations

import pytest
from _harness import NS, condition, job, jobset, operator, phase, set_jobset_status
from _pods import IMAGE, Clock, add_pod, diagnoses, issue, pull_fails, warnings

from aiperf.operator.startup import DEFAULT_THRESHOLDS
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio
WARN, FAIL = DEFAULT_THRESHOLDS.warn_after_s, DEFAULT_THRESHOLDS.fail_after_s


async def test_an_image_that_cannot_be_pulled_is_recorded_warned_then_fails_the_run(kube: FakeKube) -> None:
    clock = Clock()
    async with operator(kube, clock=clock):
        uid = kube.create(job())["metadata"]["uid"]
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        add_pod(kube, "aiperf-run-workers-0-0-abcde")
        pull_fails(kube, "aiperf-run-workers-0-0-abcde", "ErrImagePull")
        await kube.wait_until(lambda: issue(kube).get("reason") == "ErrImagePull")
        first = issue(kube)
        assert first["pod"] == "aiperf-run-workers-0-0-abcde" and first["container"] == "worker-0"
        assert first["critical"] is True and len(first["fingerprint"]) == 16
        assert first["firstObservedTime"] == clock.now.strftime("%Y-%m-%dT%H:%M:%SZ")

        clock.advance(WARN / 2)  # the kubelet backs off: another reason, the same blocker
        pull_fails(kube, "aiperf-run-workers-0-0-abcde")
        await kube.wait_until(lambda: issue(kube).get("reason") == "ImagePullBackOff")
        assert issue(kube)["firstObservedTime"] == first["firstObservedTime"]
        assert issue(kube)["fingerprint"] == first["fingerprint"] and warnings(kube) == []

        clock.advance(WARN)
        await kube.wait_until(lambda: warnings(kube))
        (event,) = warnings(kube)
        assert event["type"] == "Warning" and event["involvedObject"]["uid"] == uid
        assert "ImagePullBackOff in pod aiperf-run-workers-0-0-abcde container worker-0" in event["message"]
        assert phase(kube) == "Initializing"

        clock.advance(FAIL)
        await kube.wait_until(lambda: phase(kube) == "Failed")
        failed = condition(kube, "StartupFailed")
        assert failed["status"] == "True" and failed["reason"] == "ImagePullBackOff"
        assert first["firstObservedTime"] in failed["message"] and IMAGE in failed["message"]
        assert issue(kube)["fingerprint"] == first["fingerprint"]  # kept: it explains the end
        await kube.wait_until(lambda: jobset(kube) is None)
        assert len(warnings(kube)) == 1
    patches = [r for r in kube.requests_for("PATCH", f"/apis/aiperf.nvidia.com/v1alpha1/namespaces/{NS}/aiperfjobs")
               if isinstance(r.body, list) and {"op": "add", "path": "/status/phase", "value": "Failed"} in r.body]
    (claim,) = patches
    assert {"op": "test", "path": "/status/startupIssue/fingerprint", "value": first["fingerprint"]} in claim.body
    assert {"op": "test", "path": "/status/phase", "value": "Initializing"} in claim.body


async def test_a_capacity_shortage_is_recorded_but_never_fails_the_run(kube: FakeKube) -> None:
    clock = Clock()
    async with operator(kube, clock=clock):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        add_pod(kube, "aiperf-run-workers-0-0-abcde")
        kube.set_status("v1", "Pod", NS, "aiperf-run-workers-0-0-abcde", {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]})
        await kube.wait_until(lambda: issue(kube).get("reason") == "Unschedulable")
        assert issue(kube)["critical"] is False and "container" not in issue(kube)
        clock.advance(100 * FAIL)
        await kube.wait_until(lambda: warnings(kube))  # a sync ran far past every threshold
        assert "retryable" in warnings(kube)[0]["message"]
        assert phase(kube) == "Initializing" and not condition(kube, "StartupFailed")

        kube.run_pod(NS, "aiperf-run-workers-0-0-abcde")  # room was found
        await kube.wait_until(lambda: not issue(kube))
        set_jobset_status(kube, "run")
        await kube.wait_until(lambda: phase(kube) == "Running")


async def test_a_restarted_operator_keeps_the_first_sighting_of_a_blocker(kube: FakeKube) -> None:
    clock = Clock()
    async with operator(kube, clock=clock):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        add_pod(kube, "aiperf-run-workers-0-0-aaaaa")
        pull_fails(kube, "aiperf-run-workers-0-0-aaaaa")
        await kube.wait_until(lambda: issue(kube).get("pod") == "aiperf-run-workers-0-0-aaaaa")
    first = issue(kube)
    # While no operator runs, the Job controller replaces the pod; it fails the same way.
    kube.store.delete(kube.kind("v1", "Pod"), NS, "aiperf-run-workers-0-0-aaaaa", {})
    add_pod(kube, "aiperf-run-workers-0-0-bbbbb")
    pull_fails(kube, "aiperf-run-workers-0-0-bbbbb")
    clock.advance(FAIL - 10)
    async with operator(kube, clock=clock):
        await kube.wait_until(lambda: issue(kube).get("pod") == "aiperf-run-workers-0-0-bbbbb", timeout=20)
        assert issue(kube)["firstObservedTime"] == first["firstObservedTime"]
        assert issue(kube)["fingerprint"] == first["fingerprint"]
        assert phase(kube) == "Initializing"
        clock.advance(20)  # past the threshold counted from the first sighting, not from the restart
        await kube.wait_until(lambda: phase(kube) == "Failed")
        assert condition(kube, "StartupFailed")["reason"] == "ImagePullBackOff"


async def test_a_changed_blocker_starts_its_own_grace_period_and_a_cleared_one_goes(kube: FakeKube) -> None:
    clock = Clock()
    async with operator(kube, clock=clock):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        add_pod(kube, "aiperf-run-workers-0-0-abcde")
        pull_fails(kube, "aiperf-run-workers-0-0-abcde")
        await kube.wait_until(lambda: issue(kube).get("reason") == "ImagePullBackOff")
        first = issue(kube)
        clock.advance(FAIL - 10)
        kube.pods.set_container_state(NS, "aiperf-run-workers-0-0-abcde", "worker-0", {"waiting": {
            "reason": "CreateContainerConfigError", "message": 'secret "hf" not found'}})
        await kube.wait_until(lambda: issue(kube).get("reason") == "CreateContainerConfigError")
        assert issue(kube)["fingerprint"] != first["fingerprint"]
        assert issue(kube)["firstObservedTime"] == clock.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        clock.advance(20)  # past the first blocker's threshold, not the new one's
        await diagnoses(kube, 2)
        assert phase(kube) == "Initializing" and warnings(kube) == []
        kube.run_pod(NS, "aiperf-run-workers-0-0-abcde")
        await kube.wait_until(lambda: not issue(kube))
        assert phase(kube) == "Initializing"
