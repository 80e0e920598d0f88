"""Issue 9, testing points 1 and 2: a CRD created through the API serves its kind (and nothing
else is served), and custom resources are pruned, defaulted and validated against its schema
and CEL rules, as kube-apiserver does. Driven by kubernetes_asyncio over real HTTP."""

from __future__ import annotations

import pytest
from _widgets import WIDGET_CRD, W, status_of, widget
from kubernetes_asyncio.client import ApiClient, ApiextensionsV1Api, ApisApi, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


async def test_a_crd_created_through_the_api_serves_its_kind_until_deleted(kube: FakeKube, api: ApiClient) -> None:
    custom, apis = CustomObjectsApi(api), ApisApi(api)
    with pytest.raises(ApiException) as exc:  # no CRD, no resource: not "any URL is accepted"
        await custom.create_namespaced_custom_object(*W, widget("w"))
    assert exc.value.status == 404
    assert "example.com" not in [g.name for g in (await apis.get_api_versions()).groups]

    await ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
    group = next(g for g in (await apis.get_api_versions()).groups if g.name == "example.com")
    assert [v.group_version for v in group.versions] == ["example.com/v1"]
    resources = {r.name: r for r in (await custom.get_api_resources("example.com", "v1")).resources}
    assert set(resources) == {"widgets", "widgets/status"}
    assert (resources["widgets"].kind, resources["widgets"].namespaced, resources["widgets"].short_names) == (
        "Widget", True, ["wd"])
    created = await custom.create_namespaced_custom_object(*W, widget("w"))
    assert created["kind"] == "Widget" and created["metadata"]["uid"]
    with pytest.raises(ApiException) as exc:  # a namespaced kind has no cluster-scoped object URL
        await custom.get_cluster_custom_object("example.com", "v1", "widgets", "w")
    assert exc.value.status == 404
    with pytest.raises(ApiException) as exc:  # a version the CRD does not serve
        await custom.list_namespaced_custom_object("example.com", "v2", "bench", "widgets")
    assert exc.value.status == 404

    await ApiextensionsV1Api(api).delete_custom_resource_definition("widgets.example.com")
    await kube.wait_until(lambda: kube.store.kinds.lookup("example.com", "v1", "widgets") is None)
    with pytest.raises(ApiException) as exc:
        await custom.list_namespaced_custom_object(*W)
    assert exc.value.status == 404
    assert "example.com" not in [g.name for g in (await apis.get_api_versions()).groups]


async def test_wrong_types_enum_values_and_missing_fields_are_422(kube: FakeKube, api: ApiClient) -> None:
    kube.install_crd(WIDGET_CRD)
    custom = CustomObjectsApi(api)
    cases = [
        (widget("a", size="big"), "spec.size", "FieldValueInvalid"),
        (widget("b", mode="medium"), "spec.mode", "FieldValueNotSupported"),
        (widget("c", size=0), "spec.size", "FieldValueInvalid"),
        ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "d"}, "spec": {}},
         "spec.size", "FieldValueRequired"),
    ]
    for body, field, reason in cases:
        with pytest.raises(ApiException) as exc:
            await custom.create_namespaced_custom_object(*W, body)
        assert exc.value.status == 422, body
        status = status_of(exc)
        assert status["reason"] == "Invalid"
        assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [(field, reason)]
    assert (await custom.list_namespaced_custom_object(*W))["items"] == []
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(*W, widget("b", mode="medium"))
    assert status_of(exc)["message"] == ('Widget.example.com "b" is invalid: spec.mode: Unsupported value: '
                                         '"medium": supported values: "fast", "slow"')


async def test_unknown_fields_are_pruned_with_a_warning_and_defaults_applied(kube: FakeKube,
                                                                            api: ApiClient) -> None:
    kube.install_crd(WIDGET_CRD)
    custom = CustomObjectsApi(api)
    body = widget("w", extra=1) | {"status": {"phase": "X"}}
    created, code, headers = await custom.create_namespaced_custom_object_with_http_info(*W, body)
    assert code == 201
    assert created["spec"] == {"size": 1, "mode": "fast"}  # pruned, then defaulted
    assert "status" not in created  # create ignores status when it is a subresource
    assert 'unknown field \\"spec.extra\\"' in headers.getall("Warning")[0]
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(*W, widget("x", extra=1), field_validation="Strict")
    assert exc.value.status == 400
    assert 'unknown field "spec.extra"' in status_of(exc)["message"]

    patched = await custom.patch_namespaced_custom_object_status(
        *W, "w", {"status": {"phase": "Ready", "undeclared": True}},
        _content_type="application/merge-patch+json")
    assert patched["status"] == {"phase": "Ready"}  # status fields the schema lacks are pruned too
    assert kube.get("example.com/v1", "Widget", "bench", "w")["status"] == {"phase": "Ready"}  # type: ignore[index]


async def test_cel_rules_and_transition_rules_are_evaluated(kube: FakeKube, api: ApiClient) -> None:
    kube.install_crd(WIDGET_CRD)
    custom = CustomObjectsApi(api)
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(*W, widget("big", size=11))
    assert exc.value.status == 422
    assert status_of(exc)["details"]["causes"][0]["message"].endswith("big widgets must be slow")
    await custom.create_namespaced_custom_object(*W, widget("big", size=11, mode="slow"))

    await custom.create_namespaced_custom_object(*W, widget("c", color="red"))
    with pytest.raises(ApiException) as exc:  # oldSelf: the transition rule sees the stored value
        await custom.patch_namespaced_custom_object(*W, "c", {"spec": {"color": "blue"}},
                                                    _content_type="application/merge-patch+json")
    assert exc.value.status == 422
    assert (status_of(exc)["details"]["causes"][0]["field"], "color is immutable" in status_of(exc)["message"]) == (
        "spec.color", True)
    same = await custom.patch_namespaced_custom_object(*W, "c", {"spec": {"size": 2}},
                                                       _content_type="application/merge-patch+json")
    assert same["spec"] == {"size": 2, "mode": "fast", "color": "red"}
