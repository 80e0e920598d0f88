"""Issue 9, testing point 3: deletion is not instant. Finalizers and deletionTimestamp,
Foreground/Background/Orphan propagation, a dependent with another live owner, graceful pod
deletion, Terminating namespaces, and a same-name create while the old object still terminates.
The garbage collector runs in the background (`gc="auto"`); tests wait for its writes."""

from __future__ import annotations

from typing import Any

import pytest
from _widgets import status_of
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

JS = ("jobset.x-k8s.io", "v1alpha2", "bench", "jobsets")
HOLD = "example.com/hold"


def jobset(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "finalizers": finalizers} if finalizers else {"name": name}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": []}}


def config_map(name: str, *owners: dict[str, Any], finalizers: list[str] | None = None) -> dict[str, Any]:
    refs = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": o["metadata"]["name"],
             "uid": o["metadata"]["uid"], "blockOwnerDeletion": True} for o in owners]
    meta: dict[str, Any] = {"name": name, "ownerReferences": refs}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta}


async def test_foreground_waits_for_blocking_dependents(kube: FakeKube, api: ApiClient) -> None:
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    owner = await custom.create_namespaced_custom_object(*JS, jobset("j"))
    await core.create_namespaced_config_map("bench", config_map("dep", owner, finalizers=[HOLD]))
    await custom.delete_namespaced_custom_object(*JS, "j", propagation_policy="Foreground")
    held = await custom.get_namespaced_custom_object(*JS, "j")  # Foreground: the owner stays, marked
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["foregroundDeletion"]
    await kube.wait_until(lambda: (kube.get("v1", "ConfigMap", "bench", "dep") or {})
                          .get("metadata", {}).get("deletionTimestamp"))
    assert kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "j") is not None  # blocked by "dep"
    await core.patch_namespaced_config_map("dep", "bench", {"metadata": {"finalizers": None}})
    await kube.wait_until(lambda: kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "j") is None)
    assert kube.get("v1", "ConfigMap", "bench", "dep") is None


async def test_background_keeps_dependents_with_another_live_owner_and_orphan_keeps_all(
        kube: FakeKube, api: ApiClient) -> None:
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    a = await custom.create_namespaced_custom_object(*JS, jobset("a"))
    b = await custom.create_namespaced_custom_object(*JS, jobset("b"))
    await core.create_namespaced_config_map("bench", config_map("only-a", a))
    await core.create_namespaced_config_map("bench", config_map("a-and-b", a, b))
    await custom.delete_namespaced_custom_object(*JS, "a")  # Background by default for custom resources
    await kube.wait_until(lambda: kube.get("v1", "ConfigMap", "bench", "only-a") is None)
    shared = await core.read_namespaced_config_map("a-and-b", "bench")
    assert [r.uid for r in shared.metadata.owner_references] == [b["metadata"]["uid"]]

    c = await custom.create_namespaced_custom_object(*JS, jobset("c"))
    await core.create_namespaced_config_map("bench", config_map("only-c", c))
    await custom.delete_namespaced_custom_object(*JS, "c", propagation_policy="Orphan")
    await kube.wait_until(lambda: kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "c") is None)
    orphan = await core.read_namespaced_config_map("only-c", "bench")
    assert orphan.metadata.owner_references is None and orphan.metadata.deletion_timestamp is None


async def test_a_same_name_create_while_the_old_one_terminates_is_409(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    old = await custom.create_namespaced_custom_object(*JS, jobset("j", finalizers=[HOLD]))
    await custom.delete_namespaced_custom_object(*JS, "j")
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(*JS, jobset("j"))
    assert (exc.value.status, status_of(exc)["reason"]) == (409, "AlreadyExists")
    assert status_of(exc)["message"] == 'object is being deleted: jobsets.jobset.x-k8s.io "j" already exists'
    await custom.patch_namespaced_custom_object(*JS, "j", {"metadata": {"finalizers": None}},
                                                _content_type="application/merge-patch+json")
    new = await custom.create_namespaced_custom_object(*JS, jobset("j"))
    assert new["metadata"]["uid"] != old["metadata"]["uid"]


async def test_a_running_pod_is_deleted_gracefully(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "x"}]}})
    kube.run_pod("bench", "p")
    await core.delete_namespaced_pod("p", "bench")
    terminating = await core.read_namespaced_pod("p", "bench")  # the kubelet has not confirmed yet
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    assert kube.finish_pod("bench", "p")
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_pod("p", "bench")
    assert exc.value.status == 404


async def test_a_deleted_namespace_is_terminating_until_its_contents_are_gone(kube: FakeKube,
                                                                            api: ApiClient) -> None:
    core, custom = CoreV1Api(api), CustomObjectsApi(api)
    await core.create_namespace({"metadata": {"name": "doomed"}})
    await custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "doomed", "jobsets",
                                                 jobset("j", finalizers=[HOLD]))
    await core.delete_namespace("doomed")
    assert (await core.read_namespace("doomed")).status.phase == "Terminating"
    with pytest.raises(ApiException) as exc:  # nothing new in a terminating namespace
        await core.create_namespaced_config_map("doomed", {"metadata": {"name": "late"}})
    assert exc.value.status == 403
    await kube.wait_until(lambda: (kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "doomed", "j") or {})
                          .get("metadata", {}).get("deletionTimestamp"))
    assert (await core.read_namespace("doomed")).status.phase == "Terminating"
    await custom.patch_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "doomed", "jobsets", "j",
                                                {"metadata": {"finalizers": None}},
                                                _content_type="application/merge-patch+json")
    await kube.wait_until(lambda: kube.get("v1", "Namespace", "", "doomed") is None)
