"""Issue 23, item 1: JobSet's admission webhooks in the fake (`fake_kube_jobset`), driven by
kubernetes_asyncio over real HTTP: defaulting (Indexed jobs, OnFailure pods, success and startup
policies, DNS hostnames), the 63-character Job and pod name rules with the webhook's own words,
the immutable replicated jobs (but what Kueue changes while suspended), and a test's own webhook."""

from __future__ import annotations

from typing import Any

import pytest
from _widgets import status_of
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj
from aiperf.testing.fake_kube_jobset import POD_NAME_TOO_LONG

pytestmark = pytest.mark.anyio
GROUP, VERSION = "jobset.x-k8s.io", "v1alpha2"
MERGE = "application/merge-patch+json"


def jobset(name: str, rjob: str = "sweep-controller", *, replicas: int = 1, completions: int | None = 1,
           **spec: Any) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}}
    if completions is not None:
        job_spec.update(parallelism=completions, completions=completions)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": rjob, "replicas": replicas, "template": {"spec": job_spec}}],
                     **spec}}


async def create(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    return await CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, "bench", "jobsets", body)


async def test_the_defaulting_webhook_makes_replicated_jobs_indexed(api: ApiClient) -> None:
    created = await create(api, jobset("js"))
    spec = created["spec"]
    job_spec = spec["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed"
    assert job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}


async def test_a_pod_name_over_63_characters_is_refused_with_the_webhooks_words(api: ApiClient) -> None:
    # The sweep of issue 23: `aiperf-sweep-<name>-sweep-controller-0-0-xxxxx` for a 26-character name.
    name = "aiperf-sweep-llama-8b-concurrency-sweep"
    with pytest.raises(ApiException) as exc:
        await create(api, jobset(name))
    status = status_of(exc)
    assert (exc.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith('admission webhook "vjobset.kb.io" denied the request: '
                                        f'JobSet.jobset.x-k8s.io "{name}" is invalid: spec.replicatedJobs[0].name')
    assert POD_NAME_TOO_LONG in status["message"]
    assert f'"{name}-sweep-controller-0"' in status["message"]  # the webhook shows the Job name
    # 23 characters fit exactly: 13 + 23 + 27 = 63.
    fits = "aiperf-sweep-" + "s" * 23
    assert len(f"{fits}-sweep-controller-0-0-abcde") == 63
    await create(api, jobset(fits))
    # A non-Indexed job's pods get random names: only the Job name is checked.
    non_indexed = jobset(name)
    non_indexed["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = "NonIndexed"
    await create(api, non_indexed)


async def test_job_names_and_policy_targets_are_checked(api: ApiClient) -> None:
    with pytest.raises(ApiException) as exc:
        await create(api, jobset("j" * 55, "workers", replicas=1000, completions=None))
    assert "job names generated for this JobSet will exceed 63 characters" in status_of(exc)["message"]
    with pytest.raises(ApiException) as exc:
        await create(api, jobset("js", successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]}))
    assert "invalid replicatedJob name 'nope' does not appear in .spec.ReplicatedJobs" in status_of(exc)["message"]


async def test_replicated_jobs_are_immutable_but_kueues_fields_while_suspended(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    await create(api, jobset("js", suspend=True))
    pod_path = {"replicatedJobs": [{"name": "sweep-controller", "replicas": 1, "template": {"spec": {
        "parallelism": 1, "completions": 1, "completionMode": "Indexed", "template": {
            "spec": {"containers": [{"name": "c", "image": "img:1"}], "restartPolicy": "OnFailure",
                     "nodeSelector": {"pool": "gpu"}}}}}}]}
    patched = await custom.patch_namespaced_custom_object(GROUP, VERSION, "bench", "jobsets", "js",
                                                          {"spec": {**pod_path, "suspend": False}}, _content_type=MERGE)
    pod = patched["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"} and patched["spec"]["suspend"] is False
    pod_path["replicatedJobs"][0]["replicas"] = 2
    with pytest.raises(ApiException) as exc:
        await custom.patch_namespaced_custom_object(GROUP, VERSION, "bench", "jobsets", "js", {"spec": pod_path},
                                                    _content_type=MERGE)
    assert "spec.replicatedJobs: Invalid value" in status_of(exc)["message"]
    assert "field is immutable" in status_of(exc)["message"]


class DenyLabel:
    """A policy engine's webhook: ConfigMaps labelled `deny` are refused."""

    def applies(self, info: KindInfo) -> bool:
        return info.kind == "ConfigMap"

    def mutate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        obj["metadata"].setdefault("labels", {})["mutated"] = "yes"

    def validate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        if "deny" in obj["metadata"].get("labels", {}):
            raise ApiError.forbidden(info, obj["metadata"]["name"], "denied by policy")


async def test_a_tests_own_webhook_mutates_then_validates(kube: FakeKube, api: ApiClient) -> None:
    from kubernetes_asyncio.client import CoreV1Api

    kube.add_webhook(DenyLabel())
    core = CoreV1Api(api)
    made = await core.create_namespaced_config_map("bench", {"metadata": {"name": "a"}})
    assert made.metadata.labels == {"mutated": "yes"}
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("bench", {"metadata": {"name": "b", "labels": {"deny": "1"}}})
    assert exc.value.status == 403


async def test_kueue_creates_a_queued_jobset_suspended_and_admission_unsuspends_it(api: ApiClient) -> None:
    async with FakeKube(namespaces=["bench"], kueue=True) as kube:
        from kubernetes_asyncio.config import new_client_from_config

        async with await new_client_from_config(kube.kubeconfig_path, persist_config=False) as client:
            queued = jobset("queued")
            queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
            assert (await create(client, queued))["spec"]["suspend"] is True
            assert "suspend" not in (await create(client, jobset("plain")))["spec"]
        admitted = kube.kueue_admit("bench", "queued", {"pool": "gpu"})
        assert admitted["spec"]["suspend"] is False
        pod = admitted["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"pool": "gpu"}
