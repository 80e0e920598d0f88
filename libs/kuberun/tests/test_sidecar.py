"""`aiperf.kube.sidecar` against the fake API server: the run's end from the control plane's
container, results read through the pod proxy from the results sidecar (never from the exited api
container), each file whole or not at all, and the sidecar retired with POST /shutdown."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiperf.kubeapi import KubeApi, KubeClusterError, KubeError, connect
from aiperf.kuberun import sidecar
from aiperf.kuberun.direct import JobState
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_sidecar import FakeSidecar

pytestmark = pytest.mark.anyio

NS = "bench"
JS_API = "jobset.x-k8s.io/v1alpha2"
POD = "aiperf-demo-controller-0-0-bbbbb"
FILES = {"profile_export_aiperf.json": json.dumps({"ok": True}).encode(), "profile_export.jsonl": b"x" * 300_000}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=[NS], default_namespace=NS) as fake:
        yield fake


@pytest.fixture
async def api(kube: FakeKube) -> AsyncIterator[KubeApi]:
    client = await connect(kube.kubeconfig_path, None)
    async with client:
        yield client


def add_controller_pod(kube: FakeKube, name: str = POD) -> str:
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": "aiperf-demo", "jobset.sigs.k8s.io/replicatedjob-name": "controller"}},
        "spec": {"containers": [{"name": "control-plane", "image": "x"},
                                {"name": "api", "image": "x", "ports": [{"containerPort": 9090}]},
                                {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod(NS, name)
    return name


def add_jobset(kube: FakeKube, status: dict[str, Any] | None = None) -> None:
    kube.create({"apiVersion": JS_API, "kind": "JobSet", "metadata": {"name": "aiperf-demo", "namespace": NS},
                 "spec": {"replicatedJobs": []}})
    if status is not None:
        kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", status)


async def test_the_run_ends_when_the_control_plane_exits_not_when_the_jobset_completes(
        kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube)
    add_controller_pod(kube)
    seen: list[JobState] = []
    ends: list[sidecar.RunEnd] = []

    async def wait() -> None:
        ends.append(await sidecar.wait_run_end(api, "demo", NS, lambda state, _js: seen.append(state)))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await kube.wait_until(lambda: len(seen) >= 1 and len(kube.store.watchers) >= 2)  # both watches
            kube.end_container(NS, POD, "control-plane", 3)
    assert ends == [sidecar.RunEnd(exit_code=3, pod=POD)] and not ends[0].succeeded
    assert seen[0] == JobState.RUNNING  # the JobSet is still running: the sidecar keeps the pod up


async def test_a_jobset_that_ends_first_ends_the_wait(kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube, {"conditions": [{"type": "Suspended", "status": "True"}]})
    assert await sidecar.wait_run_end(api, "demo", NS) == sidecar.RunEnd(state=JobState.SUSPENDED)
    with pytest.raises(KubeError, match="^no run other in namespace bench"):
        await sidecar.wait_run_end(api, "other", NS)


async def test_results_come_from_the_sidecar_after_the_api_container_exited(kube: FakeKube, api: KubeApi,
                                                                          tmp_path: Path) -> None:
    add_controller_pod(kube)
    kube.end_container(NS, POD, "control-plane", 0)
    kube.end_container(NS, POD, "api", 0)
    kube.register_proxy(NS, POD, 9091, FakeSidecar(FILES, kube=kube, namespace=NS, pod=POD))
    fetched = await sidecar.fetch_results_from_pods(api, "demo", NS, tmp_path / "out")
    assert fetched.pod == POD and fetched.status["exit_code"] == 0
    assert fetched.missing == ["profile_export_aiperf.csv", "inputs.json", "profile_export_console.txt",
                               "server_metrics_export.json", "server_metrics_export.csv"]
    assert {p.name: p.read_bytes() for p in fetched.written} == FILES
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(FILES)
    proxied = [r.path for r in kube.requests if "/proxy/" in r.path]
    assert all(f"/pods/{POD}:9091/proxy/" in p for p in proxied)
    assert await sidecar.shutdown_sidecar(api, NS, POD) is True
    assert await sidecar.shutdown_sidecar(api, NS, POD) is False  # it has exited: nothing listens
    with pytest.raises(KubeClusterError, match=r"results sidecar of pod .* failed: 503 .*aiperf kube shutdown"):
        await sidecar.fetch_results_from_pods(api, "demo", NS, tmp_path / "again")


async def test_a_broken_transfer_leaves_no_file(kube: FakeKube, api: KubeApi, tmp_path: Path) -> None:
    add_controller_pod(kube)
    fake = FakeSidecar(FILES, broken=["profile_export.jsonl"])
    kube.register_proxy(NS, POD, 9091, fake)
    with pytest.raises(KubeClusterError):
        await sidecar.download_export(api, NS, POD, "profile_export.jsonl", tmp_path, durable=True)
    assert list(tmp_path.iterdir()) == []
    fake.broken.clear()
    path = await sidecar.download_export(api, NS, POD, "profile_export.jsonl", tmp_path, durable=True)
    assert path.read_bytes() == FILES["profile_export.jsonl"] and list(tmp_path.iterdir()) == [path]


async def test_results_wait_for_the_sidecar_to_see_the_end(kube: FakeKube, api: KubeApi, tmp_path: Path) -> None:
    add_controller_pod(kube)
    fake = FakeSidecar(FILES, ended=False)
    kube.register_proxy(NS, POD, 9091, fake)
    with pytest.raises(KubeClusterError, match="did not see the run end within 0.1 s"):
        await sidecar.fetch_results_from_pods(api, "demo", NS, tmp_path, ended_timeout_s=0.1)
    with pytest.raises(KubeError, match="^no controller pod for run other"):
        await sidecar.fetch_results_from_pods(api, "other", NS, tmp_path)
