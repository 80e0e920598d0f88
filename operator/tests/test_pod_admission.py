"""Issue 23, item 2, with real kopf against the fake API server playing the JobSet and Job
controllers (`FakeKube(jobs=True)`): the run's pods pass a namespace enforcing the `restricted`
Pod Security level; a pod that is never created (here: a ServiceAccount that does not exist)
becomes `status.startupIssue` from the Job's `FailedCreate` Event and fails the run past the
startup threshold; an exceeded quota is recorded but stays retryable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _harness import NS, condition, job, jobset, operator, phase
from _pods import Clock, issue, warnings

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.operator.startup import DEFAULT_THRESHOLDS
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


@pytest.fixture
async def cluster() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=[NS], jobs=True) as fake:
        fake.install_crd(build_crd(JOB_KIND))
        yield fake


def run_pods(kube: FakeKube) -> list[dict[str, Any]]:
    return [o for k, o in kube.store.all_objects() if k[1] == "pods" and k[3].startswith("aiperf-run-")]


async def test_the_run_pods_pass_the_restricted_pod_security_level(cluster: FakeKube) -> None:
    ns = cluster.get("v1", "Namespace", "", NS)
    assert ns is not None
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    cluster.update(ns)
    async with operator(cluster):
        cluster.create(job())
        await cluster.wait_until(lambda: phase(cluster) == "Initializing", timeout=20)
        expected = sum(rj["replicas"] for rj in (jobset(cluster) or {})["spec"]["replicatedJobs"])
        await cluster.wait_until(lambda: len(run_pods(cluster)) == expected)
    assert not [o for k, o in cluster.store.all_objects() if o.get("reason") == "FailedCreate"]
    security = run_pods(cluster)[0]["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 65532


async def test_pods_never_created_fail_the_run_past_the_startup_threshold(cluster: FakeKube) -> None:
    clock = Clock()
    async with operator(cluster, clock=clock):
        cluster.create(job(podTemplate={"serviceAccountName": "missing"}))
        await cluster.wait_until(lambda: issue(cluster).get("reason") == "FailedCreate", timeout=20)
        found = issue(cluster)
        assert found["critical"] is True and found["pod"].startswith("aiperf-run-")
        assert 'serviceaccount "missing" not found' in found["message"]
        assert run_pods(cluster) == []
        clock.advance(DEFAULT_THRESHOLDS.fail_after_s + 1)
        await cluster.wait_until(lambda: phase(cluster) == "Failed")
        failed = condition(cluster, "StartupFailed")
        assert failed["reason"] == "FailedCreate" and "no pod was created" in failed["message"]
        await cluster.wait_until(lambda: jobset(cluster) is None)


async def test_an_exceeded_quota_is_recorded_and_retryable(cluster: FakeKube) -> None:
    clock = Clock()
    cluster.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": NS},
                    "spec": {"hard": {"pods": "1"}}})
    async with operator(cluster, clock=clock):
        cluster.create(job())
        await cluster.wait_until(lambda: issue(cluster).get("reason") == "FailedCreate", timeout=20)
        assert issue(cluster)["critical"] is False and "exceeded quota: q" in issue(cluster)["message"]
        clock.advance(100 * DEFAULT_THRESHOLDS.fail_after_s)
        await cluster.wait_until(lambda: any("retryable" in e["message"] for e in warnings(cluster)))
        assert phase(cluster) == "Initializing" and not condition(cluster, "StartupFailed")
