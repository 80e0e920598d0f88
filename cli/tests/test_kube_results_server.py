"""`aiperf kube results NAME` in operator mode: the run stored by the operator is read from its
results server (the real app under granian on 127.0.0.1, over a results volume written by the
index's writer API) through the fake API server's services proxy to the operator's Service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiperf.crd.generator import build_crd
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND
from aiperf.results.app import create_app
from aiperf.results.index import ResultsIndex
from aiperf.runtime.http import HttpServer
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_proxy import forward_to

pytestmark = pytest.mark.anyio
NS, OPNS = "bench", "aiperf-system"
CR_API = f"{API_GROUP}/{API_VERSION}"
OLD, NEW = "1700000000111111", "1700000100222222"
NEW_FILES = {"profile_export_aiperf.json": b'{"new": true}\n', "profile_export.jsonl": b"{}\n" * 50,
             "inputs.json": b"{}\n"}
Run = Callable[..., Awaitable[Any]]


async def store(index: ResultsIndex, name: str, epoch: str, files: dict[str, bytes]) -> None:
    await index.record_created(NS, name, epoch, uid=f"uid-{epoch}", created_at=None)
    staging = await index.stage(NS, name, epoch)
    for file_name, data in files.items():
        (staging / file_name).write_bytes(data)
    await index.record_completed(NS, name, epoch, uid=f"uid-{epoch}", staging=staging, created_at=None,
                                 completed_at="2023-11-14T22:20:00Z")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[FakeKube]:
    """The fake API server with the operator's pod and Service, the results server behind them."""
    volume = tmp_path / "volume"
    index = ResultsIndex(volume, keep=10)
    await store(index, "demo", OLD, {"profile_export_aiperf.json": b'{"old": true}\n'})
    await store(index, "demo", NEW, NEW_FILES)
    await store(index, "gone", OLD, {"profile_export_aiperf.json": b'{"gone": true}\n'})
    server = HttpServer(create_app(ResultsIndex(volume, keep=10)), host="127.0.0.1", port=0)
    async with FakeKube(namespaces=[NS, OPNS]) as kube, anyio.create_task_group() as tg:
        await tg.start(server.run)
        kube.install_crd(build_crd(JOB_KIND))
        labels = {"app.kubernetes.io/name": "aiperf-operator"}
        kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "aiperf-operator", "namespace": OPNS},
                     "spec": {"selector": labels, "ports": [{"name": "http-results", "port": 8081,
                                                             "targetPort": "http-results"}]}})
        pod = "aiperf-operator-5d9c7-abcde"
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": OPNS, "labels": labels},
                     "spec": {"containers": [{"name": "operator", "image": "x"}, {
                         "name": "results-server", "image": "x",
                         "ports": [{"name": "http-results", "containerPort": 8081}]}]}})
        kube.run_pod(OPNS, pod)
        kube.register_proxy(OPNS, pod, 8081, forward_to(server.url))
        yield kube
        server.stop()


def completed_cr(kube: FakeKube, name: str, phase: str = "Completed", epoch: str = NEW) -> None:
    kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": name, "namespace": NS},
                 "spec": {"benchmark": {"models": ["m"], "endpoint": {"urls": ["http://llm:8000"]}}}})
    kube.set_status(CR_API, JOB_KIND, NS, name, {"phase": phase, "runEpoch": epoch})


def args(kube: FakeKube, *extra: str) -> list[str]:
    return ["--kubeconfig", kube.kubeconfig_path, "-n", NS, *extra]


async def test_a_completed_runs_files_come_from_the_results_server(aiperf: Run, cluster: FakeKube,
                                                                    tmp_path: Path) -> None:
    completed_cr(cluster, "demo")
    result = await aiperf("kube", "results", "demo", *args(cluster, "--artifact-dir", str(tmp_path / "out")))
    assert result.code == 0, result.err
    assert {p.name: p.read_bytes() for p in (tmp_path / "out" / "demo").iterdir()} == NEW_FILES
    assert f"run epoch {NEW}" in result.out
    proxied = {r.path for r in cluster.requests_for("GET", f"/api/v1/namespaces/{OPNS}/services/")}
    assert f"/api/v1/namespaces/{OPNS}/services/aiperf-operator:http-results/proxy/api/v1/results/{NS}/demo/runs/" \
           f"{NEW}/inputs.json" in proxied
    pinned = await aiperf("kube", "results", "demo", *args(cluster, "--epoch", OLD, "--artifact-dir",
                                                          str(tmp_path / "old")))
    assert pinned.code == 0, pinned.err
    assert (tmp_path / "old" / "demo" / "profile_export_aiperf.json").read_bytes() == b'{"old": true}\n'


async def test_a_deleted_crs_newest_stored_run(aiperf: Run, cluster: FakeKube, tmp_path: Path) -> None:
    result = await aiperf("kube", "results", "gone", *args(cluster, "--artifact-dir", str(tmp_path)))
    assert result.code == 0, result.err
    assert (tmp_path / "gone" / "profile_export_aiperf.json").read_bytes() == b'{"gone": true}\n'


async def test_what_cannot_be_had_is_one_line(aiperf: Run, cluster: FakeKube, tmp_path: Path) -> None:
    completed_cr(cluster, "failed", phase="Failed", epoch="1700000300")
    out = ["--artifact-dir", str(tmp_path)]
    cases = [(("failed", *args(cluster, *out)), 2, "ended Failed"),
             (("nothing", *args(cluster, *out)), 2, "no AIPerfJob nothing in namespace bench and no stored results"),
             (("demo", *args(cluster, "--epoch", "latest", *out)), 2, "--epoch 'latest'"),
             (("demo", *args(cluster, "--epoch", "1700000999", *out)), 2, "has no run 1700000999"),
             (("gone", *args(cluster, "--operator-namespace", NS, *out)), 2, "for a direct-mode run pass --from-pods")]
    for argv, code, text in cases:
        result = await aiperf("kube", "results", *argv)
        assert (result.code, result.err.count("\n")) == (code, 1), (argv, result.err)
        assert text in result.err, (argv, result.err)
    completed_cr(cluster, "demo")
    elsewhere = await aiperf("kube", "results", "demo", *args(cluster, "--operator-namespace", NS, *out))
    assert elsewhere.code == 1 and "no results server at service bench/aiperf-operator:http-results" in elsewhere.err
