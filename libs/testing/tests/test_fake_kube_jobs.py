"""Issue 23, item 2: the fake's JobSet and Job controllers (`FakeKube(jobs=True)`) create Jobs
and pods through admission, and the pod admission plugins refuse what a cluster refuses:
PodSecurity `restricted` by namespace label, a missing ServiceAccount, an exceeded
ResourceQuota; each refusal is a `FailedCreate` Event on the Job, once per message. Driven by
kubernetes_asyncio over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.config import new_client_from_config

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_jobs import restricted_violations

pytestmark = pytest.mark.anyio
COMPLIANT = {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
LOCKED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.fixture
async def jobs() -> AsyncIterator[tuple[FakeKube, ApiClient]]:
    async with FakeKube(namespaces=["bench"], jobs=True) as fake:
        async with await new_client_from_config(fake.kubeconfig_path, persist_config=False) as client:
            await CoreV1Api(client).create_namespaced_service_account("bench", {"metadata": {"name": "runner"}})
            yield fake, client


def jobset(name: str, *, replicas: int = 2, pod_security: dict[str, Any] | None = None,
           container_security: dict[str, Any] | None = None, account: str = "runner",
           resources: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {"name": "c", "image": "img:1", "securityContext": container_security or {},
                 "resources": resources or {}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name}, "spec": {
        "replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "serviceAccountName": account, "securityContext": pod_security or {},
                "containers": [container]}}}}}]}}


def pods(kube: FakeKube) -> list[dict[str, Any]]:
    return [o for k, o in kube.store.all_objects() if k[1] == "pods"]


def failed_creates(kube: FakeKube) -> list[dict[str, Any]]:
    return [o for k, o in kube.store.all_objects() if k[1] == "events" and o.get("reason") == "FailedCreate"]


async def create(client: ApiClient, body: dict[str, Any]) -> None:
    await CustomObjectsApi(client).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "bench", "jobsets",
                                                                   body)


async def test_a_jobset_gets_its_jobs_and_their_indexed_pods(jobs: tuple[FakeKube, ApiClient]) -> None:
    kube, client = jobs
    await create(client, jobset("js"))
    await kube.wait_until(lambda: len(pods(kube)) == 2)
    names = sorted(p["metadata"]["name"] for p in pods(kube))
    assert [n[:-6] for n in names] == ["js-workers-0-0", "js-workers-1-0"]
    labels = pods(kube)[0]["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "js" and labels["jobset.sigs.k8s.io/replicatedjob-name"] == \
        "workers"
    job = kube.get("batch/v1", "Job", "bench", "js-workers-0")
    assert job is not None and job["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


async def test_a_restricted_namespace_refuses_a_lax_pod_and_admits_a_compliant_one(
        jobs: tuple[FakeKube, ApiClient]) -> None:
    kube, client = jobs
    ns = kube.get("v1", "Namespace", "", "bench")
    assert ns is not None
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    kube.update(ns)
    await create(client, jobset("lax", replicas=1))
    await kube.wait_until(lambda: bool(failed_creates(kube)))
    (event,) = failed_creates(kube)
    assert event["type"] == "Warning" and event["involvedObject"] == {
        "apiVersion": "batch/v1", "kind": "Job", "name": "lax-workers-0", "namespace": "bench",
        "uid": kube.get("batch/v1", "Job", "bench", "lax-workers-0")["metadata"]["uid"]}
    assert event["message"].startswith('Error creating: pods "lax-workers-0-0-')
    assert 'is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false' in \
        event["message"]
    assert pods(kube) == []
    await create(client, jobset("tight", replicas=1, pod_security=COMPLIANT, container_security=LOCKED))
    await kube.wait_until(lambda: len(pods(kube)) == 1)
    assert len(failed_creates(kube)) == 1  # the refused pod is retried, its message recorded once
    assert restricted_violations({"securityContext": COMPLIANT, "containers": [
        {"name": "c", "securityContext": LOCKED}]}) == []


async def test_a_missing_service_account_and_an_exceeded_quota_are_failed_creates(
        jobs: tuple[FakeKube, ApiClient]) -> None:
    kube, client = jobs
    await create(client, jobset("nosa", replicas=1, account="missing"))
    await kube.wait_until(lambda: bool(failed_creates(kube)))
    assert 'error looking up service account bench/missing: serviceaccount "missing" not found' in \
        failed_creates(kube)[0]["message"]
    await CoreV1Api(client).create_namespaced_resource_quota("bench", {"metadata": {"name": "q"}, "spec": {
        "hard": {"pods": "1", "requests.cpu": "1"}}})
    await create(client, jobset("big", replicas=2, resources={"requests": {"cpu": "500m"}}))
    await kube.wait_until(lambda: len(failed_creates(kube)) == 2)
    assert len(pods(kube)) == 1
    (quota,) = (e["message"] for e in failed_creates(kube) if "quota" in e["message"])
    assert "exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1" in quota
    await CoreV1Api(client).create_namespaced_service_account("bench", {"metadata": {"name": "missing"}})
    await kube.wait_until(lambda: any(p["metadata"]["name"].startswith("nosa-") for p in pods(kube)) or
                          len(failed_creates(kube)) > 2)


async def test_a_finished_jobset_is_deleted_after_its_ttl() -> None:
    from aiperf.testing.fake_kube_store import now_rfc3339

    async with FakeKube(namespaces=["bench"]) as kube:
        for name, ttl in (("short", 0), ("long", 3600), ("none", None)):
            body = jobset(name, replicas=1)
            if ttl is not None:
                body["spec"]["ttlSecondsAfterFinished"] = ttl
            kube.create({**body, "metadata": {"name": name, "namespace": "bench"}})
            kube.set_status("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", name, {"conditions": [
                {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "done",
                 "lastTransitionTime": now_rfc3339()}], "terminalState": "Completed"})
        assert kube.expire_jobsets() == 1
        await kube.wait_until(lambda: kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "short") is None)
        assert kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "long") is not None
        assert kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "none") is not None
        assert 3500 < (kube.jobset_ttl.seconds_to_next_deadline() or 0) <= 3600


async def test_on_the_timer_a_finished_jobset_goes_once_its_ttl_passed() -> None:
    """`jobset_ttl="auto"`: nobody calls expire_jobsets; the JobSet finished (condition) goes by
    itself at its deadline (2 s), not before."""
    from aiperf.testing.fake_kube_store import now_rfc3339

    async with FakeKube(namespaces=["bench"], jobset_ttl="auto") as kube:
        body = jobset("timed", replicas=1)
        body["spec"]["ttlSecondsAfterFinished"] = 2
        kube.create({**body, "metadata": {"name": "timed", "namespace": "bench"}})
        kube.set_status("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "timed", {"conditions": [
            {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "done",
             "lastTransitionTime": now_rfc3339()}], "terminalState": "Completed"})
        assert kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "timed") is not None
        assert 0 < (kube.jobset_ttl.seconds_to_next_deadline() or 0) <= 2
        await kube.wait_until(lambda: kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "timed") is None,
                              timeout=30)
    with pytest.raises(ValueError, match="jobset_ttl"):
        FakeKube(jobset_ttl="auto", gc="manual")
