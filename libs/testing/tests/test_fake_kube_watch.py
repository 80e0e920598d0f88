"""Issue 9, testing points 4 and 10 (lists): a watch through a label selector sees an object
leave as DELETED and come back as ADDED, BOOKMARKs arrive when the watch allows them, and lists
page with `limit`/`continue`. Driven by kubernetes_asyncio's Watch over real HTTP; every wait
has a deadline."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


def labelled(name: str, app: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": app}}}


async def test_an_object_leaving_the_selector_is_deleted_and_coming_back_is_added(kube: FakeKube,
                                                                                 api: ApiClient) -> None:
    core = CoreV1Api(api)
    start = (await core.list_namespaced_config_map("bench")).metadata.resource_version
    seen: list[tuple[str, str, str]] = []

    async def watcher(task_status: anyio.abc.TaskStatus[None]) -> None:
        async with watch.Watch() as w:
            stream = w.stream(core.list_namespaced_config_map, "bench", label_selector="app=x",
                              resource_version=start, timeout_seconds=10, _preload_content=False)
            task_status.started()
            async for event in stream:
                obj = event["raw_object"]
                seen.append((event["type"], obj["metadata"]["name"], obj["metadata"]["labels"]["app"]))
                if len(seen) == 3:
                    break

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(watcher)
            await core.create_namespaced_config_map("bench", labelled("c", "y"))  # never matched: no event
            await core.patch_namespaced_config_map("c", "bench", {"metadata": {"labels": {"app": "x"}}})
            await core.patch_namespaced_config_map("c", "bench", {"metadata": {"labels": {"app": "y"}}})
            await core.patch_namespaced_config_map("c", "bench", {"metadata": {"labels": {"app": "x"}}})
    assert seen == [("ADDED", "c", "x"), ("DELETED", "c", "y"), ("ADDED", "c", "x")]


async def test_bookmarks_only_when_the_watch_allows_them(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_config_map("bench", labelled("c", "x"))
    current = (await core.list_namespaced_config_map("bench")).metadata.resource_version
    types: dict[bool, list[str]] = {}

    async def watcher(allow: bool, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with watch.Watch() as w:
            stream = w.stream(core.list_namespaced_config_map, "bench", resource_version=current,
                              allow_watch_bookmarks=allow, timeout_seconds=10, _preload_content=False)
            task_status.started()
            types[allow] = []
            async for event in stream:
                types[allow].append(event["type"])
                if event["type"] == "BOOKMARK":
                    assert event["raw_object"]["kind"] == "ConfigMap"
                    assert event["raw_object"]["metadata"] == {"resourceVersion": current}
                if event["type"] == "DELETED":
                    break

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(watcher, True)
            await tg.start(watcher, False)
            await kube.wait_until(lambda: len(kube.store.watchers) == 2, timeout=10)  # both connected
            kube.send_bookmarks()
            await core.delete_namespaced_config_map("c", "bench")
    assert types == {True: ["BOOKMARK", "DELETED"], False: ["DELETED"]}


async def test_lists_page_with_limit_and_continue(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    for i in range(5):
        await core.create_namespaced_config_map("bench", labelled(f"c{i}", "x"))
    names: list[str] = []
    token, pages = None, 0
    while True:
        page = await core.list_namespaced_config_map("bench", limit=2, _continue=token)
        names += [o.metadata.name for o in page.items]
        pages += 1
        assert len(page.items) <= 2
        if pages == 1:
            first_rv = page.metadata.resource_version
            assert page.metadata.remaining_item_count == 3
            await core.create_namespaced_config_map("bench", labelled("c9", "x"))  # after the first page
        else:
            assert page.metadata.resource_version == first_rv  # one snapshot version for all pages
        token = page.metadata._continue
        if not token:
            break
    assert pages == 3 and names[:5] == ["c0", "c1", "c2", "c3", "c4"]
    with pytest.raises(ApiException) as exc:
        await core.list_namespaced_config_map("bench", limit=2, _continue="not-a-token")
    assert exc.value.status == 400
    page = await core.list_namespaced_config_map("bench", limit=2)
    await core.delete_namespaced_config_map("c9", "bench")
    kube.compact()  # the token's version is compacted away
    with pytest.raises(ApiException) as exc:
        await core.list_namespaced_config_map("bench", limit=2, _continue=page.metadata._continue)
    assert exc.value.status == 410
