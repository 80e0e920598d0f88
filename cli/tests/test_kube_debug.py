"""`aiperf kube debug NAME` against the fake API server: a direct-mode run stuck on an image pull
(pods, container states, the run's events only, the verdict; `-o json`), an operator-mode run
with the operator's startupIssue and a run it failed, a run still waiting for capacity, events
the user may not list, and an unknown name."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.kube.diagnosis import classify
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
CR_API = "aiperf.nvidia.com/v1alpha1"
IMAGE = "registry.example/aiperf/worker:missing"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--concurrency", "8",
         "--request-count", "80")
Run = Callable[..., Awaitable[Any]]


def target(kube: FakeKube) -> list[str]:
    return ["--kubeconfig", kube.kubeconfig_path, "-n", NS]


def add_pod(kube: FakeKube, pod: str, role: str, containers: list[str], name: str = "demo") -> None:
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": f"aiperf-{name}", "jobset.sigs.k8s.io/replicatedjob-name": role}},
        "spec": {"containers": [{"name": c, "image": IMAGE} for c in containers]}})


def event(kube: FakeKube, name: str, kind: str, obj: str, reason: str, message: str, type_: str = "Warning",
          time: str = "2026-01-01T00:00:10Z") -> None:
    kube.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": NS},
                 "involvedObject": {"kind": kind, "name": obj, "namespace": NS}, "reason": reason,
                 "message": message, "type": type_, "lastTimestamp": time, "count": 3})


def stuck_run(kube: FakeKube) -> str:
    """Run demo's controller pod runs; its worker pod cannot pull its image. Returns the worker pod."""
    add_pod(kube, "aiperf-demo-controller-0-0-aaaaa", "controller", ["control-plane"])
    kube.run_pod(NS, "aiperf-demo-controller-0-0-aaaaa")
    worker = "aiperf-demo-workers-0-0-bbbbb"
    add_pod(kube, worker, "workers", ["worker-group-manager", "worker-0"])
    kube.pods.set_container_state(NS, worker, "worker-0", {"waiting": {
        "reason": "ImagePullBackOff", "message": f'Back-off pulling image "{IMAGE}"'}})
    kube.pods.set_container_state(NS, worker, "worker-group-manager", {"terminated": {
        "exitCode": 2, "reason": "Error", "message": "curve key file missing"}})
    event(kube, "e1", "Pod", worker, "Failed", f'Failed to pull image "{IMAGE}": not found')
    event(kube, "e2", "Job", "aiperf-demo-workers-0", "SuccessfulCreate", f"Created pod: {worker}", "Normal",
          "2026-01-01T00:00:01Z")
    event(kube, "e3", "Pod", "aiperf-demo-workers-0-0-gone1", "Scheduled", "a pod already replaced", "Normal",
          "2026-01-01T00:00:00Z")
    event(kube, "e4", "Pod", "aiperf-demo-2-workers-0-0-ccccc", "Failed", "another run's pod")
    event(kube, "e5", "Pod", "unrelated", "Failed", "not ours")
    return worker


async def test_a_direct_mode_run_stuck_on_an_image_pull(aiperf: Run, kube: FakeKube) -> None:
    started = await aiperf("kube", "profile", *BENCH, "--name", "demo", "--total-workers", "2", "--detach",
                           *target(kube))
    assert started.code == 0, started.err
    worker = stuck_run(kube)
    writes = len([r for r in kube.requests if r.method != "GET"])
    result = await aiperf("kube", "debug", "demo", *target(kube))
    assert result.code == 0, result.err
    assert len([r for r in kube.requests if r.method != "GET"]) == writes  # reads only
    out = result.out.splitlines()
    assert out[0] == "run bench/demo (direct mode: no AIPerfJob)" and out[1] == "JobSet aiperf-demo: Running"
    assert f"  {worker}  Pending  (not scheduled)" in out
    assert f'    worker-0: waiting ImagePullBackOff: Back-off pulling image "{IMAGE}"' in out
    assert "    worker-group-manager: terminated exit 2 Error: curve key file missing" in out
    assert "    control-plane: running" in out
    events = [line for line in out if line.startswith("  2026-")]
    assert [e.split("  ")[3] for e in events] == ["Pod/aiperf-demo-workers-0-0-gone1", "Job/aiperf-demo-workers-0",
                                                  f"Pod/{worker}"]
    assert events[-1].endswith(f'Failed (x3): Failed to pull image "{IMAGE}": not found')
    assert out[-1] == (f"VERDICT: blocked by ImagePullBackOff in pod {worker} container worker-0 (critical: it "
                       f'will not resolve by itself): Back-off pulling image "{IMAGE}"')

    as_json = await aiperf("kube", "debug", "demo", "-o", "json", *target(kube))
    report = json.loads(as_json.out)
    assert (report["mode"], report["job"], report["jobset"]["state"]) == ("direct", None, "Running")
    assert report["blocker"]["reason"] == "ImagePullBackOff" and report["blocker"]["firstObservedTime"] is None
    pod = next(p for p in report["pods"] if p["name"] == worker)
    assert pod["role"] == "workers" and {c["name"]: c["state"] for c in pod["containers"]} == {
        "worker-0": "waiting", "worker-group-manager": "terminated"}
    assert len(report["events"]) == 3 and report["verdict"] == out[-1].removeprefix("VERDICT: ")


def job_status(kube: FakeKube, status: dict[str, Any]) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": "demo", "namespace": NS},
                 "spec": {"benchmark": {"models": ["m"], "endpoint": {"urls": ["http://llm:8000"]}}}})
    kube.set_status(CR_API, JOB_KIND, NS, "demo", status)


async def test_an_operator_mode_run_shows_the_operators_startup_issue(aiperf: Run, kube: FakeKube) -> None:
    worker = stuck_run(kube)
    pod = kube.get("v1", "Pod", NS, worker)
    blocker = classify([pod])
    assert blocker is not None
    issue = blocker.as_status("2026-01-01T00:00:05Z")
    job_status(kube, {"phase": "Initializing", "startupIssue": issue, "conditions": [
        {"type": "WorkersReady", "status": "False", "reason": "PodsStarting", "message": "1 of 2 pods ready",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    result = await aiperf("kube", "debug", "demo", *target(kube))
    assert result.code == 0, result.err
    out = result.out.splitlines()
    assert out[:4] == ["AIPerfJob bench/demo: Initializing", "  WorkersReady=False PodsStarting: 1 of 2 pods ready",
                       f"  startupIssue: ImagePullBackOff in pod {worker} container worker-0 since "
                       f'2026-01-01T00:00:05Z (critical): Back-off pulling image "{IMAGE}"',
                       "JobSet aiperf-demo: none"]
    assert out[-1].startswith(f"VERDICT: blocked by ImagePullBackOff in pod {worker} container worker-0 since "
                              "2026-01-01T00:00:05Z (critical: the operator fails the run if it persists)")


async def test_a_run_the_operator_failed_says_why(aiperf: Run, kube: FakeKube) -> None:
    job_status(kube, {"phase": "Failed", "conditions": [
        {"type": "StartupFailed", "status": "True", "reason": "ImagePullBackOff", "message": "pull failed for 300 s",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Succeeded", "status": "False", "reason": "Failed", "message": "the run ended Failed",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    event(kube, "e1", JOB_KIND, "demo", "StartupBlocked", "ImagePullBackOff ...")
    result = await aiperf("kube", "debug", "demo", *target(kube))
    assert result.code == 0, result.err
    assert "PODS (0)" in result.out and f"{JOB_KIND}/demo  StartupBlocked" in result.out
    assert result.out.splitlines()[-1] == "VERDICT: run demo ended Failed: ImagePullBackOff: pull failed for 300 s"


async def test_a_capacity_shortage_is_retryable(aiperf: Run, kube: FakeKube) -> None:
    job_status(kube, {"phase": "Initializing"})
    add_pod(kube, "aiperf-demo-workers-0-0-aaaaa", "workers", ["worker-0"])
    kube.set_status("v1", "Pod", NS, "aiperf-demo-workers-0-0-aaaaa", {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]})
    result = await aiperf("kube", "debug", "demo", *target(kube))
    assert result.out.splitlines()[-1] == (
        "VERDICT: blocked by Unschedulable in pod aiperf-demo-workers-0-0-aaaaa (retryable: it waits for room in the "
        "cluster): 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")


async def test_an_unknown_run_is_one_line_and_exit_2(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "debug", "nope", *target(kube))
    assert result.code == 2 and result.out == ""
    assert result.err == ("error: no run nope in namespace bench: neither an AIPerfJob nope nor a JobSet aiperf-nope; "
                          "see `aiperf kube list -n bench`\n")


async def test_events_the_user_may_not_list_leave_the_rest_of_the_report(aiperf: Run, tmp_path: Path) -> None:
    async with FakeKube(namespaces=[NS], rbac=True) as kube:
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": "viewer", "namespace": NS}, "rules": [
                         {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                         {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get"]},
                         {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs"], "verbs": ["get"]}]})
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": "viewer", "namespace": NS},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "viewer"},
                     "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": NS}]})
        job_status(kube, {"phase": "Initializing"})
        add_pod(kube, "aiperf-demo-workers-0-0-aaaaa", "workers", ["worker-0"])
        kube.pods.set_container_state(NS, "aiperf-demo-workers-0-0-aaaaa", "worker-0", {"waiting": {
            "reason": "CreateContainerConfigError", "message": 'secret "hf" not found'}})
        config = kube.write_kubeconfig(tmp_path / "viewer", token=kube.token_for(NS, "viewer"))
        result = await aiperf("kube", "debug", "demo", "--kubeconfig", str(config), "-n", NS)
    assert result.code == 0, result.err
    assert any(line.startswith("EVENTS: not available: listing the events of namespace bench failed: 403")
               for line in result.out.splitlines())
    assert result.out.splitlines()[-1].startswith("VERDICT: blocked by CreateContainerConfigError in pod "
                                                  "aiperf-demo-workers-0-0-aaaaa container worker-0")
