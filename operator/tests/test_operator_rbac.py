"""The Helm chart's ClusterRole is all the operator needs: a run to Running, a cancel, a
timeout and a startup failure with the fake API server checking every request against the
chart's RBAC objects."""

from __future__ import annotations

from pathlib import Path

import pytest
from _chart import render
from _harness import CR_API, NS, condition, cr, job, jobset, operator, phase, set_jobset_status
from _pods import Clock, add_pod, issue, pull_fails, warnings
from _repo import chart_dir
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import new_client_from_config

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.kubeapi import connect
from aiperf.operator.startup import DEFAULT_THRESHOLDS
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio
RELEASE_NS = "aiperf-system"


def _install_chart_rbac(kube: FakeKube, *, finalizers: bool = True) -> str:
    """The CRD and the chart's ClusterRole and binding (without the rule on the CRs' finalizers
    unless `finalizers`); the operator's token."""
    kube.install_crd(build_crd(JOB_KIND))
    for obj in render(chart_dir(), namespace=RELEASE_NS):
        if obj["kind"] == "ClusterRole" and not finalizers:
            obj["rules"] = [r for r in obj["rules"] if not any(x.endswith("/finalizers") for x in r["resources"])]
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            kube.create(obj)
    return kube.token_for(RELEASE_NS, "aiperf-operator")


async def test_the_charts_cluster_role_suffices_for_run_cancel_and_timeout() -> None:
    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        token = _install_chart_rbac(kube)
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


async def test_without_update_on_the_finalizers_blocking_owner_references_are_refused_and_said() -> None:
    # Issue 23, item 3: OpenShift's OwnerReferencesPermissionEnforcement (on with rbac in the fake).
    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        token = _install_chart_rbac(kube, finalizers=False)
        async with operator(kube, token=token):
            kube.create(job())
            await kube.wait_until(lambda: condition(kube, "ResourcesCreated").get("reason") == "CreateRejected",
                                  timeout=20)
            cond = condition(kube, "ResourcesCreated")
            assert "cannot set blockOwnerDeletion" in cond["message"] and cond["message"].startswith(
                "ServiceAccount aiperf-run: 403 Forbidden")
            assert phase(kube) == "Pending"  # retried: a grant may still come


async def test_the_charts_cluster_role_suffices_for_startup_diagnosis() -> None:
    # List the run's pods, post the Warning Event, fail the run and delete its JobSet.
    clock = Clock()
    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        token = _install_chart_rbac(kube)
        async with operator(kube, token=token, clock=clock) as metrics:
            kube.create(job())
            await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
            add_pod(kube, "aiperf-run-workers-0-0-abcde")
            pull_fails(kube, "aiperf-run-workers-0-0-abcde")
            await kube.wait_until(lambda: issue(kube).get("reason") == "ImagePullBackOff")
            clock.advance(DEFAULT_THRESHOLDS.warn_after_s)
            await kube.wait_until(lambda: warnings(kube))
            clock.advance(DEFAULT_THRESHOLDS.fail_after_s)
            await kube.wait_until(lambda: phase(kube) == "Failed" and jobset(kube) is None)
        assert metrics.value("errors", "resync") == 0


async def test_the_charts_cluster_role_suffices_for_a_sweep_and_its_deletion() -> None:
    # Sweep-controller RBAC + JobSet created, a child cancelled when the sweep is deleted.
    from _sweep import sweep, sweep_cr, sweep_status

    from aiperf.crd.model import SWEEP_KIND
    from aiperf.kuberun.sweep_plan import SWEEP_LABEL
    from aiperf.kuberun.sweeps import SWEEPS

    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        token = _install_chart_rbac(kube)
        kube.install_crd(build_crd(SWEEP_KIND))
        async with operator(kube, token=token) as metrics:
            kube.create(sweep())
            await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Initializing", timeout=20)
            owner = sweep_cr(kube)["metadata"]
            body = job("sw-v0-t1")
            body["metadata"].update(labels={SWEEP_LABEL: "sw"}, finalizers=["test.aiperf/hold"], ownerReferences=[
                {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": SWEEP_KIND, "name": "sw", "uid": owner["uid"],
                 "controller": True}])
            kube.create(body)
            await kube.wait_until(lambda: phase(kube, "sw-v0-t1") == "Initializing", timeout=20)
            async with await connect(kube.kubeconfig_path, None) as admin:
                await admin.delete(SWEEPS, NS, "sw", uid=owner["uid"])
            await kube.wait_until(lambda: (cr(kube, "sw-v0-t1").get("spec") or {}).get("cancel") is True, timeout=20)
        assert metrics.value("errors", "sweep-create") == 0


async def test_the_charts_cluster_role_lets_the_results_server_follow_a_job(tmp_path: Path) -> None:
    """The results-server container shares the operator's ServiceAccount (`--in-cluster`): its
    live status route and socket (one LIST, one WATCH) pass the chart's RBAC."""
    import aiohttp
    import anyio

    from aiperf.results.local import LocalTree
    from aiperf.results_server.jobstatus import JobStatusFeed
    from aiperf.results_server.main import app_over
    from aiperf.runtime.http import HttpServer

    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        token = _install_chart_rbac(kube)
        kube.create(job("a"))
        kubeconfig = kube.write_kubeconfig(tmp_path / "results-server", token=token)
        api = await connect(str(kubeconfig), None)
        async with api, aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
            feed = JobStatusFeed(api=api)
            server = HttpServer(app_over(LocalTree(tmp_path), feed=feed), host="127.0.0.1", port=0,
                                drain=feed.close)
            await tg.start(server.run)
            async with session.get(f"{server.url}/api/v1/jobs/{NS}/a/status") as r:
                assert r.status == 200, await r.text()
            async with session.ws_connect(f"{server.url}/api/v1/ws/jobs/{NS}/a") as ws:
                with anyio.fail_after(10):
                    assert (await ws.receive_json())["name"] == "a"
                    kube.set_status(CR_API, JOB_KIND, NS, "a", {"phase": "Cancelled"})
                    assert (await ws.receive_json())["jobPhase"] == "Cancelled"
            server.stop()
