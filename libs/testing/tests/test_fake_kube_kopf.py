"""The fake API server driven by kopf itself over real HTTP: a CRD created through the API is
found by a standalone operator, whose create, field, timer and delete handlers run, and what
kopf writes (finalizer, annotations, status, Events) ends up as a real server would keep it."""

from __future__ import annotations

import json
import threading
from typing import Any

import aiohttp
import kopf
import pytest
from _widgets import WIDGET_CRD, W, widget
from kubernetes_asyncio.client import ApiClient, ApiextensionsV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_kopf import KopfOnFakeKube

pytestmark = pytest.mark.anyio

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"


def handlers(seen: list[tuple[str, Any]], lock: threading.Lock) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    def note(event: str, value: Any) -> None:
        with lock:
            seen.append((event, value))

    @kopf.on.create("example.com", "v1", "widgets", id="on_create", registry=registry)
    def on_create(spec: Any, body: Any, patch: kopf.Patch, **_: Any) -> dict[str, Any]:
        note("create", dict(spec))
        kopf.info(body, reason="Created", message=f"widget of size {spec['size']} created")
        patch.status["phase"] = "Created"
        return {"message": "kopf stores this under status.on_create"}

    @kopf.on.field("example.com", "v1", "widgets", field="spec.size", id="on_size", registry=registry)
    def on_size(old: Any, new: Any, patch: kopf.Patch, **_: Any) -> None:
        note("size", (old, new))
        patch.status["observedSize"] = new

    @kopf.timer("example.com", "v1", "widgets", interval=0.2, id="tick", registry=registry)
    def tick(name: str, patch: kopf.Patch, body: Any, **_: Any) -> None:
        count = int(body.metadata.annotations.get("example.com/ticks", "0")) + 1
        patch.metadata.annotations["example.com/ticks"] = str(count)

    @kopf.on.delete("example.com", "v1", "widgets", id="on_delete", registry=registry)
    def on_delete(name: str, **_: Any) -> None:
        note("delete", name)

    return registry


async def test_kopf_runs_create_field_timer_and_delete_handlers(kube: FakeKube, api: ApiClient) -> None:
    await ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
    custom = CustomObjectsApi(api)
    seen: list[tuple[str, Any]] = []
    registry = handlers(seen, threading.Lock())

    def stored(name: str = "w") -> dict[str, Any]:
        return kube.get("example.com/v1", "Widget", "bench", name) or {}

    async with KopfOnFakeKube(kube, registry=registry, namespaces=["bench"]):
        await custom.create_namespaced_custom_object(*W, widget("w", 1))
        await kube.wait_until(lambda: stored().get("status", {}).get("phase") == "Created" and
                              LAST_HANDLED in stored()["metadata"].get("annotations", {}))
        obj = stored()
        assert obj["metadata"]["finalizers"] == [FINALIZER]  # a delete handler needs one
        assert obj["spec"] == {"size": 1, "mode": "fast"}  # the schema's default, seen by the handler too
        assert ("create", {"size": 1, "mode": "fast"}) in seen
        assert "on_create" not in obj["status"] and "kopf" not in obj["status"]  # pruned, as for real
        last = json.loads(obj["metadata"]["annotations"][LAST_HANDLED])
        assert last["spec"] == {"size": 1, "mode": "fast"}

        await custom.patch_namespaced_custom_object(*W, "w", {"spec": {"size": 3}},
                                                    _content_type="application/merge-patch+json")
        await kube.wait_until(lambda: stored().get("status", {}).get("observedSize") == 3)
        assert ("size", (1, 3)) in seen
        await kube.wait_until(lambda: int(stored()["metadata"].get("annotations", {})
                                          .get("example.com/ticks", "0")) >= 2)

        def posted() -> list[dict[str, Any]]:
            return [o for k, o in kube.store.all_objects() if k[:2] == ("", "events")]

        await kube.wait_until(lambda: posted())  # kopf posts Events from a background task
        (event,) = (await CoreV1Api(api).list_namespaced_event("bench")).items
        assert (event.reason, event.message, event.type) == ("Created", "widget of size 1 created", "Normal")
        assert (event.involved_object.kind, event.involved_object.name, event.involved_object.uid) == (
            "Widget", "w", obj["metadata"]["uid"])

        await custom.delete_namespaced_custom_object(*W, "w")
        await kube.wait_until(lambda: kube.get("example.com/v1", "Widget", "bench", "w") is None)
        assert ("delete", "w") in seen

    deleted = [e for e in kube.store.history if e.type == "DELETED" and e.obj["metadata"]["name"] == "w"]
    assert deleted and deleted[0].obj["metadata"].get("deletionTimestamp")  # went through the finalizer


async def test_kopf_rejected_writes_are_422_like_a_real_server(kube: FakeKube, api: ApiClient) -> None:
    kube.install_crd(WIDGET_CRD)
    seen: list[tuple[str, Any]] = []
    async with KopfOnFakeKube(kube, registry=handlers(seen, threading.Lock()), namespaces=["bench"]):
        with pytest.raises(ApiException) as exc:  # never stored, so kopf never sees it
            await CustomObjectsApi(api).create_namespaced_custom_object(*W, widget("bad", 0))
        assert exc.value.status == 422
        await CustomObjectsApi(api).create_namespaced_custom_object(*W, widget("good", 2))
        await kube.wait_until(lambda: ("create", {"size": 2, "mode": "fast"}) in seen)
    assert [s for s in seen if s[0] == "create"] == [("create", {"size": 2, "mode": "fast"})]


async def test_a_session_a_handler_left_open_is_closed_as_kopf_stops(caplog: pytest.LogCaptureFixture) -> None:
    """Its sockets would outlive kopf's event loop and be collected later with a ResourceWarning
    (an error in whichever test runs then)."""
    registry = kopf.OperatorRegistry()
    opened: list[aiohttp.ClientSession] = []

    @kopf.on.startup(registry=registry)
    async def open_and_forget(**_: Any) -> None:
        opened.append(aiohttp.ClientSession())

    async with FakeKube(namespaces=["bench"]) as kube, KopfOnFakeKube(kube, registry=registry, namespaces=["bench"]):
        assert len(opened) == 1 and not opened[0].closed
    assert opened[0].closed
    assert any("left open as kopf stopped" in r.getMessage() for r in caplog.records)
