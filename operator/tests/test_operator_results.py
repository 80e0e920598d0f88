"""Results at completion (issue 9, item 7; issue 11, item 1), with real kopf against the fake API
server: once the controller pod's control plane has exited, the operator copies the run's exports
from the results sidecar onto its volume under `<ns>/<name>/<epoch>/`, then sets resultsPath,
runEpoch and phase Completed, then shuts the sidecar down. A copy that breaks off is retried and
never advertised. The runs index follows the run (created, phases, completed), and a CR deleted
while its results are being copied leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _chart import render
from _harness import NS, condition, cr, job, jobset, operator, phase, set_jobset_status
from _repo import chart_dir
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.config import new_client_from_config

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.kube.names import JOBSET_UID_LABEL, KEEP_SIDECAR_ANNOTATION
from aiperf.kubeapi import connect
from aiperf.operator.results import ResultsStore
from aiperf.results.disk import INDEX_FILE
from aiperf.results.keys import EPOCH_RE, run_key
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_sidecar import FakeSidecar

pytestmark = pytest.mark.anyio

FILES = {"profile_export_aiperf.json": b'{"ok": true}\n', "profile_export_aiperf.csv": b"a,b\n1,2\n",
         "profile_export.jsonl": b"{}\n" * 20_000, "inputs.json": b'{"data": []}\n'}
RELEASE_NS = "aiperf-system"


async def start_run(kube: FakeKube, fake_files: dict[str, bytes] | None = None, *, name: str = "run",
                    made_by: str | None = None, **kwargs: object) -> tuple[str, FakeSidecar]:
    """The run `name` Running, with its controller pod up (the JobSet controller's and kubelet's
    part) and the results sidecar answering through the pod proxy. `made_by`: the pod's
    jobset-uid label (default: the run's JobSet)."""
    await kube.wait_until(lambda: phase(kube, name) == "Initializing", timeout=20)
    set_jobset_status(kube, name)
    await kube.wait_until(lambda: phase(kube, name) == "Running")
    pod = f"aiperf-{name}-controller-0-0-abcde"
    made_by = made_by or (jobset(kube, name) or {})["metadata"]["uid"]
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": f"aiperf-{name}", JOBSET_UID_LABEL: made_by,
        "jobset.sigs.k8s.io/replicatedjob-name": "controller"}},
        "spec": {"containers": [{"name": "control-plane", "image": "x"},
                                {"name": "api", "image": "x", "ports": [{"containerPort": 9090}]},
                                {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod(NS, pod)
    fake = FakeSidecar(fake_files or FILES, kube=kube, namespace=NS, pod=pod, **kwargs)  # type: ignore[arg-type]
    kube.register_proxy(NS, pod, 9091, fake)
    return pod, fake


def end_control_plane(kube: FakeKube, pod: str, exit_code: int = 0) -> None:
    kube.end_container(NS, pod, "control-plane", exit_code)
    kube.end_container(NS, pod, "api")


def run_dirs(results: Path, name: str = "run") -> list[str]:
    folder = results / NS / name
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def exports(folder: Path) -> dict[str, bytes]:
    """The files of a run directory (its dot-file marker left out)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}


def index_rows(results: Path) -> list[tuple[str, str, str]]:
    """(name, epoch, phase) of every run the operator's index holds (read as the results server
    would, straight from the file)."""
    path = results / INDEX_FILE
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [tuple(row) for row in db.execute("SELECT name, epoch, phase FROM runs ORDER BY name, epoch")]


async def test_a_run_to_completed_with_results_on_the_operators_volume(kube: FakeKube, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with operator(kube, results_dir=results):
        kube.create(job())
        pod, fake = await start_run(kube)
        end_control_plane(kube, pod)
        await kube.wait_until(lambda: phase(kube) == "Completed", timeout=20)
        await kube.wait_until(lambda: fake.shutdowns == 1)
    status = cr(kube)["status"]
    epoch = status["runEpoch"]
    assert EPOCH_RE.match(epoch) and epoch == run_key(cr(kube)["metadata"]["creationTimestamp"],
                                                      cr(kube)["metadata"]["uid"])
    assert status["resultsPath"] == f"{NS}/run/{epoch}"
    stored = results / status["resultsPath"]
    assert exports(stored) == FILES
    assert index_rows(results) == [("run", epoch, "Completed")]
    assert run_dirs(results) == [epoch, "latest.txt"]  # no staging directory left
    assert (results / NS / "run" / "latest.txt").read_text() == f"{epoch}\n"
    assert condition(kube, "ResultsStored")["status"] == "True" and condition(kube, "Succeeded")["status"] == "True"
    # The JobSet still runs (the sidecar kept the pod up): Completed came from the stored results.
    proxied = [(r.method, r.path.split("/proxy", 1)[1]) for r in kube.requests if "/proxy/" in r.path]
    assert proxied[-1] == ("POST", "/shutdown")


async def test_a_broken_copy_is_retried_and_never_advertised(kube: FakeKube, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with operator(kube, results_dir=results):
        kube.create(job())
        pod, fake = await start_run(kube, broken=["profile_export.jsonl"])
        end_control_plane(kube, pod)
        await kube.wait_until(lambda: fake.served.count("profile_export.jsonl") >= 2, timeout=20)
        # Two copies broke off: nothing is advertised and no run directory exists.
        assert phase(kube) == "Running" and "resultsPath" not in cr(kube)["status"]
        assert not any(not name.startswith(".") for name in run_dirs(results))
        assert fake.shutdowns == 0  # the only copy is still in the sidecar
        fake.broken.clear()
        await kube.wait_until(lambda: phase(kube) == "Completed", timeout=20)
    stored = results / cr(kube)["status"]["resultsPath"]
    assert exports(stored) == FILES
    assert run_dirs(results) == [cr(kube)["status"]["runEpoch"], "latest.txt"]


async def test_a_failed_control_plane_fails_the_run_without_a_copy(kube: FakeKube, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with operator(kube, results_dir=results):
        kube.create(job())
        pod, fake = await start_run(kube, exit_code=1)
        end_control_plane(kube, pod, 1)
        await kube.wait_until(lambda: phase(kube) == "Failed", timeout=20)
        await kube.wait_until(lambda: fake.shutdowns == 1)
    stored = condition(kube, "ResultsStored")
    assert (stored["status"], stored["reason"]) == ("False", "ControlPlaneFailed")
    assert "exited 1" in stored["message"] and "resultsPath" not in cr(kube)["status"]
    epoch = cr(kube)["status"]["runEpoch"]
    assert run_dirs(results) == [f".{epoch}.run.json"]  # a run in the history, with no files
    assert index_rows(results) == [("run", epoch, "Failed")]


async def test_a_client_that_keeps_the_sidecar_gets_it_left_running(kube: FakeKube, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with operator(kube, results_dir=results):
        body = job()
        body["metadata"]["annotations"] = {KEEP_SIDECAR_ANNOTATION: "true"}
        kube.create(body)
        pod, fake = await start_run(kube)
        end_control_plane(kube, pod)
        await kube.wait_until(lambda: phase(kube) == "Completed", timeout=20)
    assert fake.shutdowns == 0 and (results / cr(kube)["status"]["resultsPath"]).is_dir()


async def test_the_charts_cluster_role_suffices_to_copy_the_results_and_shut_the_sidecar_down(
        tmp_path: Path) -> None:
    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        kube.install_crd(build_crd(JOB_KIND))
        for obj in render(chart_dir(), namespace=RELEASE_NS):
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                kube.create(obj)
        token = kube.token_for(RELEASE_NS, "aiperf-operator")
        async with operator(kube, token=token, results_dir=tmp_path):
            kube.create(job())
            pod, fake = await start_run(kube)
            end_control_plane(kube, pod)
            await kube.wait_until(lambda: phase(kube) == "Completed" and fake.shutdowns == 1, timeout=20)


async def test_a_same_second_reincarnation_gets_its_own_directory(kube: FakeKube, tmp_path: Path) -> None:
    """Two CRs of one name created within one second: their run keys differ by the uid-derived
    suffix, so the second one's results go to their own directory and the first one's stay; a
    repeated harvest of either is a no-op."""
    store = ResultsStore(tmp_path / "results")
    created = "2023-11-14T22:13:20Z"
    first_key, second_key = run_key(created, "aaaaaaaa-1111"), run_key(created, "bbbbbbbb-2222")
    assert first_key != second_key and first_key[:10] == second_key[:10] == "1700000000"
    assert EPOCH_RE.match(first_key) and EPOCH_RE.match(second_key)
    pod = "aiperf-run-controller-0-0-abcde"
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS},
                 "spec": {"containers": [{"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod(NS, pod)
    api = await connect(kube.kubeconfig_path, None)
    async with api:
        first_files = {"profile_export_aiperf.json": b'{"first": true}\n'}
        kube.register_proxy(NS, pod, 9091, FakeSidecar(first_files, kube=kube, namespace=NS, pod=pod, ended=True))
        first = await store.harvest(api, NS, "run", first_key, pod, "aaaaaaaa-1111")
        kube.register_proxy(NS, pod, 9091, FakeSidecar({"profile_export_aiperf.json": b'{"second": true}\n'},
                                                       kube=kube, namespace=NS, pod=pod, ended=True))
        second = await store.harvest(api, NS, "run", second_key, pod, "bbbbbbbb-2222")
        again = await store.harvest(api, NS, "run", first_key, pod, "aaaaaaaa-1111")
    assert (first.path, second.path, again.path) == (f"{NS}/run/{first_key}", f"{NS}/run/{second_key}", first.path)
    assert (store.base / first.path / "profile_export_aiperf.json").read_bytes() == b'{"first": true}\n'
    assert (store.base / second.path / "profile_export_aiperf.json").read_bytes() == b'{"second": true}\n'
    # Same wall-clock second: the later completion names itself latest.
    assert (store.base / NS / "run" / "latest.txt").read_text() == f"{second_key}\n"


class GatedSidecar:
    """A FakeSidecar whose transfer of `gated` waits until `release` is set; `reached` is set
    when that transfer starts."""

    def __init__(self, inner: FakeSidecar, gated: str) -> None:
        self.inner, self.gated = inner, gated
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, request: Any, path: str) -> Any:
        if path.endswith("/" + self.gated):
            self.reached.set()
            await self.release.wait()
        return await self.inner(request, path)


async def test_a_cr_deleted_while_its_results_are_copied_leaves_nothing(kube: FakeKube, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with operator(kube, results_dir=results) as metrics:
        kube.create(job())
        pod, fake = await start_run(kube)
        gated = GatedSidecar(fake, "profile_export_aiperf.csv")
        kube.register_proxy(NS, pod, 9091, gated)
        epoch = cr(kube)["status"]["runEpoch"]
        await kube.wait_until(lambda: index_rows(results) == [("run", epoch, "Running")])
        end_control_plane(kube, pod)
        await asyncio.wait_for(gated.reached.wait(), 20)  # the harvest is mid-copy
        await delete_cr(kube)
        # The delete interrupts the transfer that hangs: the harvest returns, the finalizer goes.
        await kube.wait_until(lambda: not cr(kube), timeout=20)
        assert metrics.value("reconciles", "delete") >= 1
        await kube.wait_until(lambda: not (results / NS).exists(), timeout=20)
        assert "profile_export_aiperf.csv" not in fake.served  # the hanging transfer never finished
        gated.release.set()
    assert run_dirs(results) == [] and index_rows(results) == []
    assert not (results / NS / "run").exists()


async def test_a_cr_deleted_while_a_handler_of_its_own_copies_the_results_leaves_nothing(
        kube: FakeKube, tmp_path: Path) -> None:
    """kopf runs one CR's handlers one at a time: a harvest inside the resume handler (the
    operator restarted after the run ended) holds back the delete handler and its tombstone, so
    the harvest must notice the deletion by itself (the old code hung here until the copy ended)."""
    results = tmp_path / "results"
    async with operator(kube, results_dir=results):
        kube.create(job())
        pod, fake = await start_run(kube)
    gated = GatedSidecar(fake, "profile_export_aiperf.csv")
    kube.register_proxy(NS, pod, 9091, gated)
    end_control_plane(kube, pod)
    async with operator(kube, results_dir=results, resync_interval=3600) as metrics:
        await asyncio.wait_for(gated.reached.wait(), 20)  # the resume handler's harvest is mid-copy
        await delete_cr(kube)
        await kube.wait_until(lambda: not cr(kube), timeout=20)
        assert metrics.value("reconciles", "delete") >= 1
        assert "profile_export_aiperf.csv" not in fake.served
        gated.release.set()
    assert run_dirs(results) == [] and index_rows(results) == []


async def test_an_ended_controller_pod_of_an_earlier_jobset_is_not_the_runs_end(kube: FakeKube, tmp_path: Path) -> None:
    """A CR deleted and created again: the first JobSet's controller pod (its jobset-uid label
    names that JobSet) can still be there, ended, while the new run runs. It is not the new run's
    end: nothing is copied from it and the run stays Running."""
    results = tmp_path / "results"
    async with operator(kube, results_dir=results) as metrics:
        kube.create(job())
        pod, fake = await start_run(kube, made_by="uid-of-an-earlier-jobset")
        end_control_plane(kube, pod)
        seen = metrics.value("reconciles", "resync")
        await kube.wait_until(lambda: metrics.value("reconciles", "resync") >= seen + 3, timeout=20)
        assert phase(kube) == "Running" and fake.served == [], (phase(kube), fake.served)
        assert index_rows(results) == [("run", cr(kube)["status"]["runEpoch"], "Running")]


async def delete_cr(kube: FakeKube) -> None:
    async with await new_client_from_config(kube.kubeconfig_path, persist_config=False) as client:
        await CustomObjectsApi(client).delete_namespaced_custom_object("aiperf.nvidia.com", "v1alpha1", NS,
                                                                       "aiperfjobs", "run")
