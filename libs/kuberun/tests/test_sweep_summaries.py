"""Issue 23, item 6: the sweep-controller's fallback when a child's results sidecar is gone: the
operator's stored copy, read from its results server through the API server's services/proxy
(a real results server over a real results volume, behind the fake API server)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiperf.kubeapi import KubeApi, connect
from aiperf.kuberun.sweeps import ResultsServerSummaries, SidecarSummaries
from aiperf.results.index import ResultsIndex
from aiperf.results_server.main import app_over
from aiperf.runtime.http import HttpServer
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_proxy import forward_to
from aiperf.testing.stored_runs import complete

NS, OPERATOR_NS, EPOCH = "bench", "aiperf-system", "1700000000111111"
SUMMARY = {"request_throughput": {"unit": "requests/sec", "avg": 20.0}}

pytestmark = pytest.mark.anyio


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeKube, KubeApi]]:
    index = ResultsIndex(tmp_path / "volume", keep=10)
    await complete(index, NS, "sw-v0-t1", EPOCH, uid="u1",
                   files={"profile_export_aiperf.json": json.dumps(SUMMARY).encode()})
    async with FakeKube(namespaces=[NS, OPERATOR_NS]) as kube, anyio.create_task_group() as tg:
        server = HttpServer(app_over(ResultsIndex(tmp_path / "volume", keep=10)), host="127.0.0.1", port=0)
        await tg.start(server.run)
        labels = {"app.kubernetes.io/name": "aiperf-operator"}
        kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "aiperf-operator",
                                                                      "namespace": OPERATOR_NS},
                     "spec": {"selector": labels, "ports": [{"name": "http-results", "port": 8081}]}})
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "op", "namespace": OPERATOR_NS,
                                                                     "labels": labels},
                     "spec": {"containers": [{"name": "results-server", "image": "x",
                                              "ports": [{"containerPort": 8081}]}]}})
        kube.run_pod(OPERATOR_NS, "op")
        kube.register_proxy(OPERATOR_NS, "op", 8081, forward_to(server.url))
        async with await connect(kube.kubeconfig_path, None) as api:
            yield kube, api
        server.stop()


def child(phase: str = "Completed", epoch: str | None = EPOCH) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if epoch:
        status["runEpoch"] = epoch
    return {"metadata": {"name": "sw-v0-t1", "namespace": NS}, "status": status}


async def test_a_gone_sidecar_falls_back_to_the_operators_copy(cluster: tuple[FakeKube, KubeApi],
                                                               tmp_path: Path) -> None:
    _, api = cluster
    stored = ResultsServerSummaries(api=api, service=f"{OPERATOR_NS}/aiperf-operator:8081")
    summaries = SidecarSummaries(api=api, cache_dir=tmp_path / "cache", fallback=stored)
    assert await summaries.fetch(child()) == SUMMARY  # no controller pod, no sidecar: the stored copy
    assert json.loads((tmp_path / "cache" / "sw-v0-t1.json").read_text()) == SUMMARY  # cached
    assert await stored.fetch(child(phase="Failed")) is None
    assert await stored.fetch(child(epoch="1700000999000000")) is None  # no such stored run: 404, logged
    assert await SidecarSummaries(api=api, cache_dir=tmp_path / "bare").fetch(child()) is None


def test_the_results_service_must_name_namespace_service_and_port() -> None:
    with pytest.raises(ValueError, match="expected <namespace>/<service>:<port>"):
        ResultsServerSummaries(api=None, service="aiperf-operator")  # type: ignore[arg-type]
