"""`aiperf kube profile` and `kube cancel` in operator mode, in-process against the fake API
server with the AIPerfJob CRD installed; the test plays the operator by writing the CR's status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.kube.names import KEEP_SIDECAR_ANNOTATION
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_sidecar import FakeSidecar

pytestmark = pytest.mark.anyio

NS = "bench"
CR_API = "aiperf.nvidia.com/v1alpha1"
CR_PATH = f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--concurrency", "8",
         "--request-count", "80")
Run = Callable[..., Awaitable[Any]]


def args(kube: FakeKube, *extra: str) -> list[str]:
    return ["kube", "profile", *BENCH, "--name", "demo", "--total-workers", "2", *extra,
            "--kubeconfig", kube.kubeconfig_path, "-n", NS]


def stored(kube: FakeKube) -> dict[str, Any] | None:
    return kube.get(CR_API, JOB_KIND, NS, "demo")


async def test_the_probe_finds_the_crd_and_submits_an_aiperfjob(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    result = await aiperf(*args(kube, "--detach"))
    assert result.code == 0, result.err
    assert [(r.method, r.path) for r in kube.requests] == [
        ("GET", f"/apis/{CR_API}"), ("GET", f"/api/v1/namespaces/{NS}"), ("POST", CR_PATH)]
    job = stored(kube)
    assert job is not None and job["spec"]["benchmark"]["runtime"]["workers"] == 2
    assert result.out.startswith(f"created AIPerfJob {NS}/demo")
    assert kube.requests_for("POST", "/apis/jobset.x-k8s.io") == []  # the operator's job, not ours


async def test_without_the_crd_the_probe_falls_back_to_direct_mode(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf(*args(kube, "--detach"))
    assert result.code == 0, result.err
    assert kube.requests[0].path == f"/apis/{CR_API}"
    assert [r.body["kind"] for r in kube.requests_for("POST")] == ["ServiceAccount", "Role", "RoleBinding", "Secret",
                                                                 "ConfigMap", "JobSet"]


async def test_no_operator_forces_direct_mode_without_a_probe(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    result = await aiperf(*args(kube, "--detach", "--no-operator"))
    assert result.code == 0, result.err
    assert kube.requests_for("GET", f"/apis/{CR_API}") == [] and stored(kube) is None
    assert [r.body["kind"] for r in kube.requests_for("POST")] == ["ServiceAccount", "Role", "RoleBinding", "Secret",
                                                                 "ConfigMap", "JobSet"]


async def test_operator_forces_operator_mode_without_a_probe(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    result = await aiperf(*args(kube, "--detach", "--operator"))
    assert result.code == 0, result.err
    assert [(r.method, r.path) for r in kube.requests] == [("GET", f"/api/v1/namespaces/{NS}"), ("POST", CR_PATH)]


async def test_a_second_submission_says_to_delete_first(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    assert (await aiperf(*args(kube, "--detach", "--operator"))).code == 0
    again = await aiperf(*args(kube, "--detach", "--operator"))
    assert again.code == 2 and again.err.count("\n") == 1
    assert "AIPerfJob demo already exists" in again.err and "aiperf kube delete demo" in again.err


async def test_profile_watches_the_phase_until_the_run_fails(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    outcome: dict[str, Any] = {}

    async def run() -> None:
        outcome["result"] = await aiperf(*args(kube, "--operator"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await kube.wait_until(lambda: any(r.query.get("watch") == "true" for r in kube.requests_for("GET", CR_PATH)))
        kube.set_status(CR_API, JOB_KIND, NS, "demo", {"phase": "Running", "subPhase": "profiling",
                                                       "requestsCompleted": 10, "requestsTotal": 80})
        kube.set_status(CR_API, JOB_KIND, NS, "demo", {"phase": "Failed", "conditions": [
            {"type": "TimedOut", "status": "True", "reason": "Timeout",
             "message": "the run exceeded timeoutSeconds 60"}]})
    result = outcome["result"]
    assert result.code == 1
    assert "run demo: Running (profiling), 10/80 requests" in result.out
    assert result.err.strip().endswith("run demo failed: the run exceeded timeoutSeconds 60")


async def test_profile_downloads_from_the_sidecar_the_operator_left_to_it(aiperf: Run, kube: FakeKube,
                                                                         tmp_path: Path) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    outcome: dict[str, Any] = {}
    files = {"profile_export_aiperf.json": b'{"ok": true}\n', "inputs.json": b"{}\n"}

    async def run() -> None:
        outcome["result"] = await aiperf(*args(kube, "--operator", "--artifact-dir", str(tmp_path)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await kube.wait_until(lambda: any(r.query.get("watch") == "true" for r in kube.requests_for("GET", CR_PATH)))
        # the attached client asked the operator to leave the results sidecar to it
        assert stored(kube)["metadata"]["annotations"] == {KEEP_SIDECAR_ANNOTATION: "true"}  # type: ignore[index]
        pod = "aiperf-demo-controller-0-0-abcde"
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
            "jobset.sigs.k8s.io/jobset-name": "aiperf-demo", "jobset.sigs.k8s.io/replicatedjob-name": "controller"}},
            "spec": {"containers": [{"name": "control-plane", "image": "x"},
                                    {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
        kube.run_pod(NS, pod)
        kube.end_container(NS, pod, "control-plane")
        fake = FakeSidecar(files, kube=kube, namespace=NS, pod=pod)
        kube.register_proxy(NS, pod, 9091, fake)
        kube.set_status(CR_API, JOB_KIND, NS, "demo", {"phase": "Completed", "runEpoch": "1700000000",
                                                       "resultsPath": "bench/demo/1700000000"})
    result = outcome["result"]
    assert result.code == 0, result.err
    assert {p.name: p.read_bytes() for p in (tmp_path / "demo").iterdir()} == files
    assert fake.shutdowns == 1 and f"results sidecar of pod {pod} shut down" in result.out
    assert "results stored by the operator under bench/demo/1700000000 (run epoch 1700000000)" in result.out


async def test_cancel_in_operator_mode_sets_spec_cancel_fenced_on_the_uid(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    assert (await aiperf(*args(kube, "--detach", "--operator"))).code == 0
    uid = stored(kube)["metadata"]["uid"]  # type: ignore[index]
    result = await aiperf("kube", "cancel", "demo", "--kubeconfig", kube.kubeconfig_path, "-n", NS)
    assert result.code == 0, result.err
    assert result.out.startswith("cancelled run demo: spec.cancel is true on AIPerfJob bench/demo")
    (patch,) = kube.requests_for("PATCH")
    assert patch.content_type == "application/json-patch+json"
    assert patch.body == [{"op": "test", "path": "/metadata/uid", "value": uid},
                          {"op": "add", "path": "/spec/cancel", "value": True}]
    assert stored(kube)["spec"]["cancel"] is True  # type: ignore[index]
    assert kube.requests_for("GET", "/apis/jobset.x-k8s.io") == []

    kube.set_status(CR_API, JOB_KIND, NS, "demo", {"phase": "Cancelled"})
    again = await aiperf("kube", "cancel", "demo", "--kubeconfig", kube.kubeconfig_path, "-n", NS)
    assert again.code == 0 and again.out.strip() == "run demo already Cancelled; nothing to cancel"
    assert len(kube.requests_for("PATCH")) == 1


async def test_delete_in_operator_mode_deletes_the_cr_fenced_on_its_uid(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    assert (await aiperf(*args(kube, "--detach", "--operator"))).code == 0
    uid = stored(kube)["metadata"]["uid"]  # type: ignore[index]
    result = await aiperf("kube", "delete", "demo", "--kubeconfig", kube.kubeconfig_path, "-n", NS)
    assert result.code == 0, result.err
    assert result.out == f"deleted AIPerfJob {NS}/demo; what it owns goes with it\n"
    (request,) = kube.requests_for("DELETE")
    assert request.path == f"{CR_PATH}/demo" and request.body["preconditions"] == {"uid": uid}
    await kube.wait_until(lambda: stored(kube) is None)
