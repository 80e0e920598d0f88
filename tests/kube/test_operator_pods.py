"""The operator end to end with real pods: `aiperf kube profile` submits an AIPerfJob to the fake
API server, the operator (real kopf, in this process) creates the run's RBAC, ConfigMap, Secret
and JobSet, and `PodmanCluster` (tests/kube/_cluster.py) plays the JobSet controller and the
kubelet on podman; the pods reach the fake API server the way pods reach a cluster's (in-cluster
env and a mounted ServiceAccount token, RBAC enforced), on the run's own internal network.

Opt-in like test_podman_pods.py (AIPERF_PODMAN_E2E=1 after the images are built).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from kube._cluster import PodmanCluster, network_gateway
from kube._podman import MOCK_ALIAS, MOCK_IMAGE, MOCK_PORT, missing_images, podman, wait_mock_healthy

from aiperf.cli.main import main
from aiperf.kube.crd import build_crd
from aiperf.kube.crd_model import API_GROUP, API_VERSION, JOB_KIND, SWEEP_KIND
from aiperf.operator.desired import Defaults
from aiperf.operator.handlers import build_registry, tune
from aiperf.operator.metrics import Metrics
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_kopf import KopfOnFakeKube, fast_settings

NS = "bench"
CR_API = f"{API_GROUP}/{API_VERSION}"
RUN_S = 420.0
"""Bound on one run from submission to a terminal phase: the pods start in 60-90 s on 2 cores
(see _podman.STARTUP_S), the benchmark itself takes seconds."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.anyio,
    pytest.mark.skipif(os.environ.get("AIPERF_PODMAN_E2E") != "1",
                       reason="plays real pods under podman: set AIPERF_PODMAN_E2E=1 after building the "
                              "images (tests/kube/run_podman_e2e.sh does both)"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def _images() -> None:
    missing = missing_images()
    if missing:
        pytest.fail(f"AIPERF_PODMAN_E2E=1 but images are missing: {', '.join(missing)}")


@asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[FakeKube]:
    """An internal network with the mock LLM server, the fake API server on its gateway with the
    CRDs installed and RBAC on, the kubelet/JobSet player and the operator; all torn down after."""
    tag = uuid.uuid4().hex[:6]
    network, mock = f"aiperf-op-{tag}", f"aiperf-op-{tag}-mock"
    podman("network", "create", "--internal", network)
    player: PodmanCluster | None = None
    try:
        podman("run", "-d", "--name", mock, "--network", network, "--network-alias", MOCK_ALIAS, MOCK_IMAGE,
               "--port", str(MOCK_PORT), "--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16")
        wait_mock_healthy(mock)
        gateway = network_gateway(network)
        async with FakeKube(namespaces=[NS], host=gateway, rbac=True) as kube:
            for kind in (JOB_KIND, SWEEP_KIND):
                kube.install_crd(build_crd(kind))
            port = int(kube.url.rsplit(":", 1)[1])
            player = PodmanCluster(kube, network=network, workdir=tmp_path / "pods", api_host=gateway,
                                   api_port=port)

            async def connect() -> Any:
                from kubernetes_asyncio.config import new_client_from_config
                return await new_client_from_config(kube.kubeconfig_path, persist_config=False)

            registry = build_registry(connect=connect, defaults=Defaults(), metrics=Metrics(),
                                      resync_interval=1.0, retry_delay=0.5)
            async with anyio.create_task_group() as tg:
                tg.start_soon(player.run)
                async with KopfOnFakeKube(kube, registry=registry, namespaces=[NS], settings=tune(fast_settings())):
                    yield kube
                tg.cancel_scope.cancel()
    finally:
        if player is not None:
            await anyio.to_thread.run_sync(player.close)
        podman("rm", "-f", "-t", "0", mock, check=False)
        podman("network", "rm", "-f", network, check=False)


def status(kube: FakeKube, name: str) -> dict[str, Any]:
    return dict((kube.get(CR_API, JOB_KIND, NS, name) or {}).get("status") or {})


async def profile(kube: FakeKube, name: str, *extra: str) -> int:
    """`aiperf kube profile --operator --detach` for a small run against the mock."""
    argv = ["kube", "profile", "--model", "mock", "--url", f"http://{MOCK_ALIAS}:{MOCK_PORT}",
            "--endpoint-type", "chat", "--streaming", "--concurrency", "4", "--request-count", "40",
            "--name", name, "--total-workers", "2", "--workers-per-pod", "1", "--operator", "--detach",
            *extra, "--kubeconfig", kube.kubeconfig_path, "-n", NS]
    code: int = await anyio.to_thread.run_sync(main, argv)
    return code


@pytest.mark.timeout(900)
async def test_a_run_completes_through_the_operator(tmp_path: Path) -> None:
    async with cluster(tmp_path) as kube:
        assert await profile(kube, "op") == 0
        await kube.wait_until(lambda: status(kube, "op").get("phase") in ("Completed", "Failed", "Cancelled"),
                              timeout=RUN_S)
        final = status(kube, "op")
        assert final["phase"] == "Completed", final
