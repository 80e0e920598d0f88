"""The operator end to end with real pods, shared by tests/kube/test_operator_*.py: `cluster()`
gives an internal podman network with the mock LLM server, the fake API server on its gateway
(CRDs installed, RBAC on, the PodSecurity/ServiceAccount/ResourceQuota admission plugins, the
namespace enforcing the `restricted` Pod Security level, JobSet TTLs on their timer), `PodmanCluster` (tests/kube/_cluster.py)
playing the JobSet controller and the kubelet, and the operator (real kopf, in this process).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from kube._cluster import PodmanCluster, network_gateway
from kube._podman import MOCK_ALIAS, MOCK_IMAGE, MOCK_PORT, podman, wait_mock_healthy

from aiperf.cli.main import main
from aiperf.crd.generator import build_crd
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND, SWEEP_KIND
from aiperf.kubeapi import KubeApi, connect
from aiperf.operator.desired import Defaults
from aiperf.operator.handlers import build_registry, tune
from aiperf.operator.metrics import Metrics
from aiperf.operator.results import ResultsStore
from aiperf.operator.startup import StartupThresholds
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_jobs import ENFORCE_LABEL
from aiperf.testing.fake_kube_kopf import KopfOnFakeKube, fast_settings
from aiperf.testing.fake_kube_tls import make_tls_files

NS = "bench"
CR_API = f"{API_GROUP}/{API_VERSION}"
BENCHMARK = {"models": ["mock"], "endpoint": {"urls": [f"http://{MOCK_ALIAS}:{MOCK_PORT}"], "type": "chat",
                                               "streaming": True},
             "datasets": [{"type": "synthetic", "entries": 8, "prompts": {"isl": {"mean": 16}, "osl": {"mean": 8}}}],
             "phases": [{"type": "concurrency", "name": "profiling", "concurrency": 2, "requests": 20}],
             "runtime": {"workers": 1}}
FAST = StartupThresholds(warn_after_s=2, fail_after_s=15)
"""Startup thresholds of these tests: a pull error fails its run 15 s after it is first seen."""
TEARDOWN_S = 360.0
"""Bound on a deleted run's pods leaving podman (garbage collection, then `kube play --down` of
each pod; minutes when the 2-core host is loaded)."""
RUN_S = 420.0
"""Bound on one run from submission to a terminal phase: the pods start in 60-90 s on 2 cores
(see _podman.STARTUP_S), the benchmark itself takes seconds."""


class Operator:
    """The operator (real kopf on the fake API server) in a task of its own: `restart()` stops
    it and starts a fresh one, as a rolled operator Deployment would."""

    def __init__(self, kube: FakeKube, tg: anyio.abc.TaskGroup, thresholds: StartupThresholds,
                 results: ResultsStore) -> None:
        self.kube, self.tg, self.thresholds, self.results = kube, tg, thresholds, results
        self.starts = 0
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    async def _serve(self) -> None:
        async def connect_api() -> KubeApi:
            return await connect(self.kube.kubeconfig_path, None)

        registry = build_registry(connect=connect_api, defaults=Defaults(), metrics=Metrics(),
                                  resync_interval=1.0, retry_delay=0.5, thresholds=self.thresholds,
                                  results=self.results)
        try:
            async with KopfOnFakeKube(self.kube, registry=registry, namespaces=[NS],
                                      settings=tune(fast_settings())):
                await self._stop.wait()
        finally:
            self._stopped.set()

    def start(self) -> None:
        self.starts += 1
        self._stop, self._stopped = anyio.Event(), anyio.Event()
        self.tg.start_soon(self._serve)

    async def stop(self) -> None:
        self._stop.set()
        await self._stopped.wait()

    async def restart(self) -> None:
        await self.stop()
        self.start()


@dataclass
class Cluster:
    kube: FakeKube
    operator: Operator
    player: PodmanCluster
    results: Path


@asynccontextmanager
async def cluster(tmp_path: Path, *, thresholds: StartupThresholds = FAST) -> AsyncIterator[Cluster]:
    """An internal network with the mock LLM server, the fake API server on its gateway with the
    CRDs installed and RBAC on, the kubelet/JobSet player and the operator; all torn down after."""
    tag = uuid.uuid4().hex[:6]
    network, mock = f"aiperf-op-{tag}", f"aiperf-op-{tag}-mock"
    podman("network", "create", "--internal", network)
    try:
        podman("run", "-d", "--name", mock, "--network", network, "--network-alias", MOCK_ALIAS, MOCK_IMAGE,
               "--port", str(MOCK_PORT), "--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16")
        wait_mock_healthy(mock)
        gateway = network_gateway(network)
        tls = make_tls_files(tmp_path / "tls", gateway)
        async with FakeKube(namespaces=[NS], host=gateway, rbac=True, tls=tls, pod_admission=True,
                            jobset_ttl="auto") as kube:
            namespace = kube.get("v1", "Namespace", "", NS) or {}
            namespace["metadata"]["labels"] = {**namespace["metadata"].get("labels", {}), ENFORCE_LABEL: "restricted"}
            kube.update(namespace)
            for kind in (JOB_KIND, SWEEP_KIND):
                kube.install_crd(build_crd(kind))
            port = int(kube.url.rsplit(":", 1)[1])
            player = PodmanCluster(kube, network=network, workdir=tmp_path / "pods", api_host=gateway,
                                   api_port=port, ca=tls.ca)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(player.run)
                    results = tmp_path / "operator-results"
                    operator = Operator(kube, tg, thresholds, ResultsStore(results))
                    operator.start()
                    try:
                        yield Cluster(kube, operator, player, results)
                    finally:
                        with anyio.CancelScope(shield=True):
                            await operator.stop()
                        tg.cancel_scope.cancel()
            finally:
                # The pods go while the API server still answers their last requests.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(player.close)
    finally:
        podman("rm", "-f", "-t", "0", mock, check=False)
        podman("network", "rm", "-f", network, check=False)


def status(kube: FakeKube, name: str) -> dict[str, Any]:
    return dict((kube.get(CR_API, JOB_KIND, NS, name) or {}).get("status") or {})


async def profile(kube: FakeKube, name: str, *, requests: int = 40, extra: Sequence[str] = ()) -> int:
    """`aiperf kube profile --operator --detach` for a small run against the mock (`extra`: more
    flags)."""
    argv = ["kube", "profile", "--model", "mock", "--url", f"http://{MOCK_ALIAS}:{MOCK_PORT}",
            "--endpoint-type", "chat", "--streaming", "--concurrency", "4", "--request-count", str(requests),
            "--name", name, "--total-workers", "2", "--workers-per-pod", "1", "--operator", "--detach",
            # one prompt per request is AIPerf's default since issue 21: 100,000 prompts starved the
            # 2-core host (a worker pod missed its heartbeats and the run failed before it was seen Running)
            "--num-dataset-entries", "100",
            "--kubeconfig", kube.kubeconfig_path, "-n", NS, *extra]
    code: int = await anyio.to_thread.run_sync(main, argv)
    return code



def terminal(kube: FakeKube, name: str) -> bool:
    return status(kube, name).get("phase") in ("Completed", "Failed", "Cancelled")


def played_containers(c: Cluster, name: str) -> int:
    """Containers of run `name` that podman still runs."""
    out = podman("ps", "--format", "{{.Names}}", check=False).stdout.split()
    return sum(1 for n in out if n.startswith(f"aiperf-{name}-"))



def kube_cli(kube: FakeKube, *argv: str) -> int:
    code: int = main([*argv, "--kubeconfig", kube.kubeconfig_path, "-n", NS])
    return code

