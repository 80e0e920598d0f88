"""The fake Kubernetes API server, driven by kubernetes_asyncio itself over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from aiohttp import web
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import (
    ApiClient,
    CoreV1Api,
    CustomObjectsApi,
    RbacAuthorizationV1Api,
)
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

JS = ("jobset.x-k8s.io", "v1alpha2")


def jobset(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "aiperf"}},
            "spec": {"replicatedJobs": [], **spec}}


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.value.body)
    return body


async def test_create_assigns_server_fields_and_get_returns_them(api: ApiClient) -> None:
    core = CoreV1Api(api)
    first = await core.create_namespaced_config_map("bench", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    second = await core.create_namespaced_config_map("bench", {"metadata": {"name": "b"}})
    assert first.metadata.uid and first.metadata.uid != second.metadata.uid
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert first.metadata.creation_timestamp is not None
    assert first.metadata.namespace == "bench"
    got = await core.read_namespaced_config_map("a", "bench")
    assert (got.metadata.uid, got.data) == (first.metadata.uid, {"k": "v"})
    custom = CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    assert created["metadata"]["generation"] == 1
    assert (created["apiVersion"], created["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")


async def test_duplicate_create_is_409_already_exists_with_a_status_body(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    assert exc.value.status == 409
    assert status_of(exc) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "AlreadyExists",
        "message": 'jobsets.jobset.x-k8s.io "j" already exists', "code": 409,
        "details": {"name": "j", "group": "jobset.x-k8s.io", "kind": "jobsets"}}


async def test_namespaces_exist_only_when_created(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    with pytest.raises(ApiException) as exc:
        await core.read_namespace("missing")
    assert (exc.value.status, status_of(exc)["message"]) == (404, 'namespaces "missing" not found')
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("missing", {"metadata": {"name": "a"}})
    assert exc.value.status == 404
    assert status_of(exc)["reason"] == "NotFound"
    assert status_of(exc)["message"] == 'namespaces "missing" not found'
    await core.create_namespace({"metadata": {"name": "missing"}})
    assert (await core.read_namespace("missing")).status.phase == "Active"
    await core.create_namespaced_config_map("missing", {"metadata": {"name": "a"}})
    assert (await core.list_namespaced_config_map("nowhere")).items == []


async def test_list_filters_by_label_and_field_selectors(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    for name, labels in [("a", {"app": "x", "tier": "1"}), ("b", {"app": "x"}), ("c", {"app": "y"})]:
        body = jobset(name)
        body["metadata"]["labels"] = labels
        await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", body)

    async def names(**kw: str) -> list[str]:
        listed = await custom.list_namespaced_custom_object(*JS, "bench", "jobsets", **kw)
        return [o["metadata"]["name"] for o in listed["items"]]

    assert await names() == ["a", "b", "c"]
    assert await names(label_selector="app=x") == ["a", "b"]
    assert await names(label_selector="app==x,tier") == ["a"]
    assert await names(label_selector="app!=x") == ["c"]
    assert await names(label_selector="!tier,app in (x, y)") == ["b", "c"]
    assert await names(label_selector="app notin (x)") == ["c"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    listed = await custom.list_cluster_custom_object(*JS, "jobsets")
    assert listed["kind"] == "JobSetList" and int(listed["metadata"]["resourceVersion"]) > 0
    with pytest.raises(ApiException) as exc:
        await custom.list_namespaced_custom_object(*JS, "bench", "jobsets", field_selector="spec.x=1")
    assert exc.value.status == 400


async def test_put_with_a_stale_resource_version_is_409_conflict(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    fresh = dict(created, spec={"replicatedJobs": [], "suspend": True})
    updated = await custom.replace_namespaced_custom_object(*JS, "bench", "jobsets", "j", fresh)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert updated["metadata"]["generation"] == 2
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(ApiException) as exc:
        await custom.replace_namespaced_custom_object(*JS, "bench", "jobsets", "j", created)
    assert exc.value.status == 409
    assert status_of(exc)["reason"] == "Conflict"
    assert status_of(exc)["message"] == ('Operation cannot be fulfilled on jobsets.jobset.x-k8s.io "j": the '
                                         "object has been modified; please apply your changes to the latest "
                                         "version and try again")
    no_rv = jobset("j")
    with pytest.raises(ApiException) as exc:  # custom resources need a resourceVersion on PUT
        await custom.replace_namespaced_custom_object(*JS, "bench", "jobsets", "j", no_rv)
    assert exc.value.status == 422


async def test_json_patch_applies_atomically_and_a_failing_test_op_is_422(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    uid = created["metadata"]["uid"]
    patched = await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}},
        {"op": "add", "path": "/spec/suspend", "value": True}])
    assert patched["metadata"]["annotations"] == {"a/b": "1"} and patched["spec"]["suspend"] is True
    with pytest.raises(ApiException) as exc:
        await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
            {"op": "replace", "path": "/spec/suspend", "value": False},
            {"op": "test", "path": "/metadata/uid", "value": "someone-else"}])
    assert exc.value.status == 422
    body = status_of(exc)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["message"] == "testing value /metadata/uid failed: test failed"
    unchanged = await custom.get_namespaced_custom_object(*JS, "bench", "jobsets", "j")
    assert unchanged["spec"]["suspend"] is True
    assert unchanged["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as exc:  # the path does not exist
        await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
            {"op": "remove", "path": "/spec/nothing"}])
    assert exc.value.status == 422


async def test_a_dict_sent_as_json_patch_is_400_like_the_real_server(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    with pytest.raises(ApiException) as exc:  # CustomObjectsApi sends a dict body as JSON Patch
        await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", {"spec": {"suspend": True}})
    assert exc.value.status == 400


async def test_nan_or_infinity_in_a_body_is_400_like_the_real_server(api: ApiClient) -> None:
    """Go's JSON decoder takes no NaN or Infinity, which Python's `json.dumps` writes by default."""
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ApiException) as exc:
            await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
                {"op": "add", "path": "/metadata/annotations", "value": {"x": "1"}},
                {"op": "add", "path": "/spec/x", "value": value}])
        assert exc.value.status == 400
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", {**jobset("k"), "x": float("nan")})
    assert exc.value.status == 400


async def test_merge_patch_and_strategic_merge_patch(kube: FakeKube, api: ApiClient) -> None:
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    body = jobset("j")
    body["metadata"]["annotations"] = {"keep": "1", "drop": "2"}
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", body)
    patched = await custom.patch_namespaced_custom_object(
        *JS, "bench", "jobsets", "j", {"metadata": {"annotations": {"drop": None, "new": "3"}},
                                       "spec": {"suspend": True}},
        _content_type="application/merge-patch+json")
    assert patched["metadata"]["annotations"] == {"keep": "1", "new": "3"}
    assert patched["spec"]["replicatedJobs"] == [] and patched["spec"]["suspend"] is True
    with pytest.raises(ApiException) as exc:  # custom resources refuse strategic merge patch
        await custom.patch_namespaced_custom_object(
            *JS, "bench", "jobsets", "j", {"spec": {}},
            _content_type="application/strategic-merge-patch+json")
    assert exc.value.status == 415
    await core.create_namespaced_config_map("bench", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    cm = await core.patch_namespaced_config_map("c", "bench", {"data": {"b": "2"}})
    assert cm.data == {"a": "1", "b": "2"}
    assert kube.requests[-1].content_type == "application/strategic-merge-patch+json"


async def test_status_subresource_is_the_only_way_to_change_status(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    body = jobset("j")
    body["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
    created = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", body)
    assert "status" not in created  # create drops status
    status = {"conditions": [{"type": "Failed", "status": "True"}]}
    merged = "application/merge-patch+json"
    after_main = await custom.patch_namespaced_custom_object(
        *JS, "bench", "jobsets", "j", {"status": status, "metadata": {"labels": {"x": "y"}}},
        _content_type=merged)
    assert "status" not in after_main and after_main["metadata"]["labels"]["x"] == "y"
    after_status = await custom.patch_namespaced_custom_object_status(
        *JS, "bench", "jobsets", "j", {"status": status, "spec": {"suspend": True},
                                       "metadata": {"labels": {"x": "z"}}}, _content_type=merged)
    assert after_status["status"] == status
    assert "suspend" not in after_status["spec"] and after_status["metadata"]["labels"]["x"] == "y"
    assert after_status["metadata"]["generation"] == after_main["metadata"]["generation"]
    replaced = await custom.replace_namespaced_custom_object(
        *JS, "bench", "jobsets", "j", dict(after_status, status={"conditions": []}))
    assert replaced["status"] == status  # main-resource writes ignore status
    tested = await custom.patch_namespaced_custom_object_status(*JS, "bench", "jobsets", "j", [
        {"op": "test", "path": "/metadata/uid", "value": created["metadata"]["uid"]},
        {"op": "replace", "path": "/status/conditions/0/type", "value": "Completed"}])
    assert tested["status"]["conditions"][0]["type"] == "Completed"
    core = CoreV1Api(api)
    await core.create_namespaced_config_map("bench", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as exc:  # no status subresource on ConfigMaps
        await api.call_api("/api/v1/namespaces/bench/configmaps/c/status", "GET",
                           auth_settings=["BearerToken"], response_types_map={200: "object"})
    assert exc.value.status == 404


async def test_watch_streams_changes_from_a_resource_version(kube: FakeKube, api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("other"))
    seen: list[tuple[str, str]] = []

    async def watcher(task_status: anyio.abc.TaskStatus[None]) -> None:
        async with watch.Watch() as w:
            stream = w.stream(custom.list_namespaced_custom_object, *JS, "bench", "jobsets",
                              field_selector="metadata.name=j",
                              resource_version=created["metadata"]["resourceVersion"])
            task_status.started()
            async for event in stream:
                seen.append((event["type"], event["object"]["metadata"]["resourceVersion"]))
                if event["type"] == "DELETED":
                    w.stop()
                    break

    async with anyio.create_task_group() as tg:
        await tg.start(watcher)
        modified = await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
            {"op": "add", "path": "/spec/suspend", "value": True}])
        await custom.delete_namespaced_custom_object(*JS, "bench", "jobsets", "j")
        await custom.delete_namespaced_custom_object(*JS, "bench", "jobsets", "other")
    assert [t for t, _ in seen] == ["MODIFIED", "DELETED"]
    assert seen[0][1] == modified["metadata"]["resourceVersion"]
    assert int(seen[1][1]) > int(seen[0][1])


async def test_watch_without_a_version_lists_first_and_a_compacted_version_is_410(
        kube: FakeKube, api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    old = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    async with watch.Watch() as w:
        async for event in w.stream(custom.list_namespaced_custom_object, *JS, "bench", "jobsets",
                                    timeout_seconds=1):
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "j")
            break
    await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
        {"op": "add", "path": "/spec/suspend", "value": True}])
    kube.compact()  # the change after `old` is forgotten
    with pytest.raises(ApiException) as exc:
        async with watch.Watch() as w:
            async for _ in w.stream(custom.list_namespaced_custom_object, *JS, "bench", "jobsets",
                                    resource_version=old["metadata"]["resourceVersion"], timeout_seconds=1):
                pass
    assert exc.value.status == 410


async def test_watch_ends_at_timeout_seconds(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    with anyio.fail_after(5):
        async with watch.Watch() as w:
            events = [e async for e in w.stream(custom.list_namespaced_custom_object, *JS, "bench",
                                                "jobsets", timeout_seconds=1)]
    assert events == []


async def test_finalizers_hold_a_deleted_object_until_removed(kube: FakeKube, api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    body = jobset("j")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", body)
    await custom.delete_namespaced_custom_object(*JS, "bench", "jobsets", "j")
    held = await custom.get_namespaced_custom_object(*JS, "bench", "jobsets", "j")
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as exc:
        await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
            {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/more"}])
    assert exc.value.status == 422
    await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", [
        {"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as exc:
        await custom.get_namespaced_custom_object(*JS, "bench", "jobsets", "j")
    assert exc.value.status == 404
    assert [e.type for e in kube.store.history if e.obj["metadata"]["name"] == "j"] == [
        "ADDED", "MODIFIED", "DELETED"]


async def test_delete_preconditions_and_owner_cascade(kube: FakeKube, api: ApiClient) -> None:
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    owner = await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    await core.create_namespaced_service("bench", {"metadata": {"name": "j", "ownerReferences": [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "j",
         "uid": owner["metadata"]["uid"]}]}, "spec": {"clusterIP": "None"}})
    with pytest.raises(ApiException) as exc:
        await custom.delete_namespaced_custom_object(*JS, "bench", "jobsets", "j",
                                                     body={"preconditions": {"uid": "not-it"}})
    assert exc.value.status == 409
    assert "Precondition failed: UID in precondition: not-it" in status_of(exc)["message"]
    with pytest.raises(ApiException) as exc:
        await custom.delete_namespaced_custom_object(*JS, "bench", "jobsets", "j",
                                                     body={"preconditions": {"resourceVersion": "1"}})
    assert exc.value.status == 409
    gone = await custom.delete_namespaced_custom_object(
        *JS, "bench", "jobsets", "j", propagation_policy="Foreground",
        body={"preconditions": {"uid": owner["metadata"]["uid"]}})
    assert gone["metadata"]["uid"] == owner["metadata"]["uid"]
    assert (await core.list_namespaced_service("bench")).items == []
    with pytest.raises(ApiException) as exc:
        await custom.delete_namespaced_custom_object(*JS, "bench", "jobsets", "j")
    assert exc.value.status == 404
    assert kube.requests_for("DELETE")[-2].query == {"propagationPolicy": "Foreground"}


async def test_rbac_and_secret_kinds(api: ApiClient) -> None:
    rbac, core = RbacAuthorizationV1Api(api), CoreV1Api(api)
    role = await rbac.create_namespaced_role("bench", {"metadata": {"name": "r"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    assert role.kind == "Role" and role.api_version == "rbac.authorization.k8s.io/v1"
    await rbac.create_namespaced_role_binding("bench", {"metadata": {"name": "r"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": []})
    assert [b.metadata.name for b in (await rbac.list_namespaced_role_binding("bench")).items] == ["r"]
    secret = await core.create_namespaced_secret("bench", {"metadata": {"name": "s"},
                                                           "stringData": {"k": "v"}})
    assert secret.data == {"k": "dg=="}
    status = await rbac.delete_namespaced_role("r", "bench")
    assert status.status == "Success"


async def test_pod_logs(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "image": "x"}, {"name": "b", "image": "x"}]}})
    kube.run_pod("bench", "p")
    kube.set_pod_log("bench", "p", "one\ntwo\nthree\n", container="a")
    assert await core.read_namespaced_pod_log("p", "bench", container="a") == "one\ntwo\nthree\n"
    assert await core.read_namespaced_pod_log("p", "bench", container="a", tail_lines=2) == "two\nthree\n"
    assert await core.read_namespaced_pod_log("p", "bench", container="b") == ""
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_pod_log("p", "bench")
    assert exc.value.status == 400
    assert status_of(exc)["message"] == "a container name must be specified for pod p, choose one of: [a b]"
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_pod_log("nope", "bench")
    assert exc.value.status == 404


async def test_pod_proxy_reaches_a_registered_handler(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "api", "image": "x", "ports": [{"containerPort": 9090}]}]}})
    with pytest.raises(ApiException) as exc:  # no pod IP yet
        await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "api/x")
    assert (exc.value.status, status_of(exc)["message"]) == (400, "address not allowed")
    pod = kube.run_pod("bench", "p")
    with pytest.raises(ApiException) as exc:  # nothing listens on the port
        await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "api/x")
    assert exc.value.status == 503
    assert status_of(exc)["message"] == (f"error trying to reach service: dial tcp {pod['status']['podIP']}:9090: "
                                         "connect: connection refused")

    async def handler(request: web.Request, path: str) -> web.Response:
        return web.Response(text=f"{request.method} {path} {request.query.get('q')}")

    kube.register_proxy("bench", "p", 9090, handler)
    answer = await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "api/x", path2="y")
    assert answer == "GET /api/x None"
    raw = await api.call_api("/api/v1/namespaces/bench/pods/p:9090/proxy/api/results", "GET",
                             query_params=[("q", "1")], auth_settings=["BearerToken"],
                             _preload_content=False, _return_http_data_only=True)
    try:
        assert (raw.status, await raw.text()) == (200, "GET /api/results 1")
    finally:
        raw.release()
    with pytest.raises(ApiException) as exc:
        await core.connect_get_namespaced_pod_proxy_with_path("gone:9090", "bench", "api/x")
    assert exc.value.status == 404


async def test_request_log_records_method_path_content_type_and_body(kube: FakeKube, api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*JS, "bench", "jobsets", jobset("j"))
    ops = [{"op": "add", "path": "/spec/suspend", "value": True}]
    await custom.patch_namespaced_custom_object(*JS, "bench", "jobsets", "j", ops)
    post, patch = kube.requests_for(path_prefix="/apis/jobset.x-k8s.io")
    assert (post.method, post.path, post.content_type) == (
        "POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/bench/jobsets", "application/json")
    assert post.body == jobset("j")
    assert (patch.method, patch.path, patch.content_type, patch.body) == (
        "PATCH", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/bench/jobsets/j", "application/json-patch+json",
        ops)


async def test_test_helpers_write_through_the_store(kube: FakeKube, api: ApiClient) -> None:
    kube.create(jobset("j") | {"metadata": {"name": "j", "namespace": "bench"}})
    kube.set_status("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "j", {"terminalState": "Completed"})
    got = await CustomObjectsApi(api).get_namespaced_custom_object(*JS, "bench", "jobsets", "j")
    assert got["status"] == {"terminalState": "Completed"}
    assert kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", "j") == got
