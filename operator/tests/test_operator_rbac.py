"""The Helm chart's ClusterRole is all the operator needs: a run to Running, a cancel and a
timeout with the fake API server checking every request against the chart's RBAC objects."""

from __future__ import annotations

from pathlib import Path

import pytest
from _chart import render
from _harness import NS, condition, cr, job, jobset, operator, phase, set_jobset_status
from _repo import chart_dir
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import new_client_from_config

from aiperf.kube.crd import build_crd
from aiperf.kube.crd_model import JOB_KIND
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio
RELEASE_NS = "aiperf-system"


async def test_the_charts_cluster_role_suffices_for_run_cancel_and_timeout() -> None:
    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        kube.install_crd(build_crd(JOB_KIND))
        for obj in render(chart_dir(), namespace=RELEASE_NS):
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                kube.create(obj)
        token = kube.token_for(RELEASE_NS, "aiperf-operator")
        async with operator(kube, token=token) as metrics:
            kube.create(job("a"))
            kube.create(job("b", timeoutSeconds=1))
            await kube.wait_until(lambda: phase(kube, "a") == "Initializing", timeout=20)
            set_jobset_status(kube, "a")
            await kube.wait_until(lambda: phase(kube, "a") == "Running")
            live = cr(kube, "a")
            kube.update({**live, "spec": {**live["spec"], "cancel": True}})
            await kube.wait_until(lambda: phase(kube, "a") == "Cancelled")
            await kube.wait_until(lambda: phase(kube, "b") == "Failed" and jobset(kube, "b") is None, timeout=20)
            assert condition(kube, "TimedOut", "b")["status"] == "True"
        assert metrics.value("errors", "create") == 0
        # The check is real: the same token may not list Secrets (it creates the runs' key Secrets only).
        kubeconfig = kube.write_kubeconfig(Path(kube.kubeconfig_path).with_name("probe"), token=token)
        async with await new_client_from_config(str(kubeconfig), persist_config=False) as client:
            with pytest.raises(ApiException) as exc:
                await CoreV1Api(client).list_namespaced_secret(NS)
        assert exc.value.status == 403
