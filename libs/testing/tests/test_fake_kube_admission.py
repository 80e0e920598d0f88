"""Issue 9, testing points 5, 7, 9 and 10 (events, JSON Patch): what the apiserver checks and
fills in before it stores anything. The body must match the URL, metadata must be valid, some
Pod fields are immutable, `dryRun` persists nothing, built-in kinds get server-side defaults and
empty metadata maps vanish, strategic merge patch merges keyed lists and obeys directives,
events.k8s.io/v1 shares storage with core Events. Driven by kubernetes_asyncio over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from _widgets import status_of
from kubernetes_asyncio.client import ApiClient, BatchV1Api, CoreV1Api, CustomObjectsApi, EventsV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "img:1"}], **spec}}


async def refused(call: Any, *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    """The status code and Status body of a request that must fail."""
    with pytest.raises(ApiException) as exc:
        await call(*args, **kwargs)
    return exc.value.status, status_of(exc)


async def test_the_body_must_match_the_url_and_carry_valid_metadata(api: ApiClient) -> None:
    core, custom = CoreV1Api(api), CustomObjectsApi(api)
    code, _ = await refused(core.create_namespaced_config_map, "bench",
                            {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    assert code == 400
    code, _ = await refused(custom.create_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", "bench",
                            "jobsets", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "Widget",
                                        "metadata": {"name": "j"}, "spec": {}})
    assert code == 422
    cases = [
        ({"name": "Bad_Name"}, "metadata.name"),
        ({"name": "a", "labels": {"app": "not ok"}}, "metadata.labels"),
        ({"name": "a", "annotations": {"bad key": "v"}}, "metadata.annotations"),
        ({"name": "a", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}]},
         "metadata.ownerReferences.uid"),
    ]
    for meta, field in cases:
        code, status = await refused(core.create_namespaced_config_map, "bench", {"metadata": meta})
        assert (code, status["reason"]) == (422, "Invalid"), meta
        assert [c["field"] for c in status["details"]["causes"]] == [field], meta
    assert (await core.list_namespaced_config_map("bench")).items == []


async def test_immutable_pod_fields_are_refused_on_update(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", pod("p"))
    code, status = await refused(core.patch_namespaced_pod, "p", "bench", {"spec": {"restartPolicy": "Never"}})
    assert (code, status["reason"]) == (422, "Invalid")
    assert "pod updates may not change fields other than" in status["message"]
    patched = await core.patch_namespaced_pod("p", "bench", {"spec": {"containers": [
        {"name": "c", "image": "img:2"}]}})  # the image is one of the mutable fields
    assert patched.spec.containers[0].image == "img:2"


async def test_dry_run_persists_nothing(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    created = await core.create_namespaced_config_map("bench", {"metadata": {"name": "a"}}, dry_run="All")
    assert created.metadata.name == "a"
    code, _ = await refused(core.read_namespaced_config_map, "a", "bench")
    assert code == 404
    await core.create_namespaced_config_map("bench", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    rv = (await core.read_namespaced_config_map("a", "bench")).metadata.resource_version
    await core.patch_namespaced_config_map("a", "bench", {"data": {"k": "2"}}, dry_run="All")
    await core.delete_namespaced_config_map("a", "bench", dry_run="All")
    kept = await core.read_namespaced_config_map("a", "bench")
    assert (kept.data, kept.metadata.resource_version) == ({"k": "1"}, rv)
    assert [e.type for e in kube.store.history if e.obj["metadata"]["name"] == "a"] == ["ADDED"]


async def test_server_side_defaults_and_empty_metadata_maps(api: ApiClient) -> None:
    core, batch = CoreV1Api(api), BatchV1Api(api)
    created = await core.create_namespaced_pod("bench", pod("p") | {"metadata": {
        "name": "p", "labels": {}, "annotations": {}}})
    assert (created.metadata.labels, created.metadata.annotations) == (None, None)
    spec, container = created.spec, created.spec.containers[0]
    assert (spec.restart_policy, spec.dns_policy, spec.termination_grace_period_seconds, spec.scheduler_name,
            spec.service_account_name) == ("Always", "ClusterFirst", 30, "default-scheduler", "default")
    assert (container.image_pull_policy, container.termination_message_path) == (
        "IfNotPresent", "/dev/termination-log")
    assert (created.status.phase, created.status.qos_class) == ("Pending", "BestEffort")
    svc = await core.create_namespaced_service("bench", {"metadata": {"name": "s"}, "spec": {
        "ports": [{"port": 80}]}})
    assert (svc.spec.type, svc.spec.session_affinity, svc.spec.ports[0].protocol,
            svc.spec.ports[0].target_port) == ("ClusterIP", "None", "TCP", 80)
    assert svc.spec.cluster_ip
    job = await batch.create_namespaced_job("bench", {"metadata": {"name": "j"}, "spec": {"template": {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "img:1"}]}}}})
    assert (job.spec.backoff_limit, job.spec.completions, job.spec.parallelism, job.spec.completion_mode) == (
        6, 1, 1, "NonIndexed")


async def test_strategic_merge_patch_merges_keyed_lists_and_obeys_directives(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p", "finalizers": ["x.io/a"]}, "spec": {
        "containers": [{"name": "a", "image": "img:1"}, {"name": "b", "image": "img:1"}]}})
    patched = await core.patch_namespaced_pod("p", "bench", {"metadata": {"finalizers": ["x.io/b"]}, "spec": {
        "containers": [{"name": "b", "image": "img:2"}]}})  # merged by name, not replaced
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "img:1"), ("b", "img:2")]
    assert patched.metadata.finalizers == ["x.io/a", "x.io/b"]  # a merged set
    await core.create_namespaced_service("bench", {"metadata": {"name": "s"}, "spec": {"ports": [
        {"name": "http", "port": 80}, {"name": "zmq", "port": 5555}]}})
    svc = await core.patch_namespaced_service("s", "bench", {"spec": {"ports": [
        {"port": 80, "$patch": "delete"}, {"name": "api", "port": 9090}]}})
    assert sorted((p.name, p.port) for p in svc.spec.ports) == [("api", 9090), ("zmq", 5555)]
    code, _ = await refused(core.patch_namespaced_service, "s", "bench",
                            {"spec": {"ports": [{"port": 5555, "$patch": "explode"}]}})
    assert code == 422  # an unknown directive is refused, not stored


async def test_events_k8s_io_shares_storage_with_core_events(api: ApiClient) -> None:
    core, events = CoreV1Api(api), EventsV1Api(api)
    await events.create_namespaced_event("bench", {
        "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Started",
        "note": "it began", "type": "Normal", "action": "Start", "reportingController": "example.com/op",
        "reportingInstance": "op-1", "regarding": {"kind": "Pod", "name": "p", "namespace": "bench"}})
    (core_event,) = (await core.list_namespaced_event("bench")).items
    assert (core_event.reason, core_event.message, core_event.involved_object.name) == ("Started", "it began", "p")
    (new_event,) = (await events.list_namespaced_event("bench")).items
    assert (new_event.note, new_event.regarding.kind) == ("it began", "Pod")


async def test_a_json_patch_test_of_null_on_a_missing_path_passes(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "bench", "jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "j"},
        "spec": {"replicatedJobs": []}})
    patched = await custom.patch_namespaced_custom_object_status(
        "jobset.x-k8s.io", "v1alpha2", "bench", "jobsets", "j", [
            {"op": "test", "path": "/status", "value": None},
            {"op": "add", "path": "/status", "value": {"restarts": 1}}])
    assert patched["status"] == {"restarts": 1}
