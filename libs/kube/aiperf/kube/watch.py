"""Following a collection of objects: list it, then watch it from the list's resourceVersion,
through server timeouts, cut connections and expired histories (what an informer does).

    listing = await list_collection(api, path, label_selector="app.kubernetes.io/name=aiperf")
    await follow(api, path, listing, on_list=..., on_event=...)   # until cancelled
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.kube.client import KubeClusterError
from aiperf.kube.ops import MAX_BROKEN_WATCHES, BrokenWatch, _call, _describe, _error_of, _events, _open

Obj = dict[str, Any]


@dataclass(frozen=True)
class Listing:
    """The objects of one LIST and the resourceVersion to watch from."""

    items: list[Obj]
    resource_version: str


async def list_collection(api: ApiClient, path: str, *, label_selector: str | None = None,
                          field_selector: str | None = None) -> Listing | None:
    """LIST `path` (every page) narrowed by the selectors; None when the API server does not
    serve it (404: no such resource type, e.g. the CRD is not installed). KubeClusterError for
    any other error."""
    items: list[Obj] = []
    query: dict[str, str] = {"limit": "500", **_selectors(label_selector, field_selector)}
    while True:
        try:
            page: Obj = await _call(api, "GET", path, query=query)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 410 and "continue" in query:  # the token expired mid-way: start over
                items, query = [], {k: v for k, v in query.items() if k != "continue"}
                continue
            raise KubeClusterError(f"listing {path} failed: {_describe(exc)}") from None
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return Listing(items, str((page.get("metadata") or {}).get("resourceVersion", "")))
        query["continue"] = token


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    query = {"labelSelector": label_selector, "fieldSelector": field_selector}
    return {k: v for k, v in query.items() if v}


class _Expired(Exception):
    """The watch history no longer reaches back to our resourceVersion: list again."""


async def follow(api: ApiClient, path: str, start: Listing, *, on_list: Callable[[list[Obj]], None],
                 on_event: Callable[[str, Obj], None], label_selector: str | None = None,
                 field_selector: str | None = None, watch_timeout_s: int = 300) -> None:
    """Watch `path` from `start.resource_version` until cancelled; never returns.

    `on_event(type, obj)` gets every ADDED, MODIFIED and DELETED event; BOOKMARKs only move the
    resourceVersion on. A watch the server ends (`watch_timeout_s`) or that is cut (connection
    lost, half a line, unreachable server) is reopened from the last resourceVersion seen, so no
    change is missed. When that version is too old (410 Expired, history compacted) the
    collection is listed again and `on_list(items)` gets the fresh objects (the caller diffs).
    KubeClusterError when `MAX_BROKEN_WATCHES` watches in a row break, or on another error.
    The selectors narrow the watch (and a re-list) as they narrowed `start`."""
    rv, broken = start.resource_version, 0
    query: dict[str, str] = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(watch_timeout_s),
                             **_selectors(label_selector, field_selector)}
    while True:
        try:
            try:
                response = await _open(api, path, {**query, "resourceVersion": rv})
            except KubeClusterError as exc:  # unreachable for a moment
                raise BrokenWatch(str(exc)) from None
            try:
                if response.status == 410:
                    raise _Expired
                if response.status != 200:
                    raise KubeClusterError(f"watching {path} failed: {_describe(await _error_of(response))}")
                async with aclosing(_events(response)) as events:
                    async for event in events:
                        broken = 0
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                raise _Expired
                            raise KubeClusterError(f"watching {path} failed: {obj.get('message')}")
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if kind in ("ADDED", "MODIFIED", "DELETED"):
                            on_event(str(kind), obj)
            finally:
                response.release()
        except _Expired:
            fresh = await list_collection(api, path, label_selector=label_selector, field_selector=field_selector)
            if fresh is None:
                raise KubeClusterError(f"{path} is no longer served (its CRD was deleted?)") from None
            rv = fresh.resource_version
            on_list(fresh.items)
        except (aiohttp.ClientError, TimeoutError, BrokenWatch) as exc:
            broken += 1
            if broken >= MAX_BROKEN_WATCHES:
                raise KubeClusterError(f"watching {path} failed {broken} times in a row; last: "
                                       f"{exc or type(exc).__name__}") from None
            await anyio.sleep(min(0.1 * 2 ** broken, 5.0))  # back off before reconnecting


__all__ = ["Listing", "follow", "list_collection"]
