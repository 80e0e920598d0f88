"""The HTTP side of the fake API server that does not need the server object: LIST pages and
WATCH streams over a `Store`, the request attributes RBAC sees, and small request/response
helpers shared by `fake_kube`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

from aiohttp import web

from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj
from aiperf.testing.fake_kube_rbac import Attributes, verb_of
from aiperf.testing.fake_kube_select import BOOKMARK, Selector, Watcher
from aiperf.testing.fake_kube_store import Store, present

_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list.")


def list_page(request: web.Request, store: Store, info: KindInfo, namespace: str | None, selector: Selector) -> Obj:
    """A LIST answer: the matching objects from the `continue` token's position on, at most
    `limit` of them, with a new token when more remain; 400 for a bad token, 410 Expired (with a
    fresh token) when its version was compacted away. Pages are not a consistent snapshot."""
    items = store.list_objects(info, namespace, selector)
    rv, start = store.current_rv, ""
    token = request.query.get("continue")
    meta: Obj = {}
    if token:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, start = int(decoded["rv"]), str(decoded["start"])
        except (ValueError, KeyError, TypeError):
            raise ApiError.bad_request("continue key is not valid: incorrect encoded start "
                                       "resourceVersion (version meta.k8s.io/v1)") from None
        if rv < store.compacted_rv:
            fresh = _continue_token(store.current_rv, start)
            raise ApiError(410, "Expired", _CONTINUE_EXPIRED, metadata={"continue": fresh})
        items = [o for o in items if _item_key(o) > start]
    limit = int(request.query.get("limit") or 0)
    if limit > 0 and len(items) > limit:
        meta["continue"] = _continue_token(rv, _item_key(items[limit - 1]))
        if not request.query.get("labelSelector") and not request.query.get("fieldSelector"):
            meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    meta["resourceVersion"] = str(rv)
    return {"kind": f"{info.kind}List", "apiVersion": info.api_version, "metadata": meta,
            "items": [present(info, o) for o in items]}


async def serve_watch(request: web.Request, store: Store, info: KindInfo, namespace: str | None, selector: Selector,
                      *, bookmark_interval: float) -> web.StreamResponse:
    """A WATCH answer, streamed until `timeoutSeconds`, the client leaving or the server closing
    (a None in the watcher's queue): the initial ADDED events (no resourceVersion, or
    `sendInitialEvents`) or the history since the resourceVersion (an ERROR event with 410 when
    compacted), then live events; BOOKMARKs every `bookmark_interval` s when allowed. An
    `("ERROR", status)` item in the queue is sent as an ERROR event and ends the watch."""
    group, plural = info.storage
    query = request.query
    watcher = Watcher(group, plural, namespace, selector,
                      bookmarks=query.get("allowWatchBookmarks", "").lower() == "true")
    rv_param = query.get("resourceVersion", "")
    initial = query.get("sendInitialEvents", "").lower() == "true"
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        if rv_param in ("", "0") or initial:
            backlog = [("ADDED", o) for o in store.list_objects(info, namespace, selector)]
            if initial and watcher.bookmarks:
                backlog.append((BOOKMARK, {"metadata": {
                    "resourceVersion": str(store.current_rv),
                    "annotations": {"k8s.io/initial-events-end": "true"}}}))
        else:
            backlog = store.events_since(watcher, int(rv_param))
    except (ApiError, ValueError) as exc:
        error = (exc if isinstance(exc, ApiError)
                 else ApiError.bad_request(f"invalid resourceVersion {rv_param}"))
        await response.write(_line({"type": "ERROR", "object": error.status()}))
        return response
    store.watchers.add(watcher)
    loop = asyncio.get_running_loop()
    timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
    deadline = None if timeout is None else loop.time() + timeout
    next_bookmark = loop.time() + bookmark_interval
    try:
        for backlog_type, obj in backlog:
            await response.write(event_line(info, backlog_type, obj))
        while True:
            now = loop.time()
            if watcher.bookmarks and now >= next_bookmark:
                next_bookmark = now + bookmark_interval
                watcher.queue.put_nowait((BOOKMARK, {"metadata": {"resourceVersion": str(store.current_rv)}}))
            wait = 0.5 if deadline is None else min(0.5, deadline - now)
            if wait <= 0:
                break
            try:
                item = await asyncio.wait_for(watcher.queue.get(), wait)
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    break
                continue
            if item is None:
                break
            event_type, payload = item
            if event_type == "ERROR":  # the server gives up on this watch: the Status, then the end
                await response.write(_line({"type": "ERROR", "object": payload}))
                break
            if isinstance(payload, bytes):  # CUT: a connection lost mid-stream, no end of body
                await response.write(payload)
                if request.transport is not None:
                    request.transport.abort()
                return response
            await response.write(event_line(info, event_type, payload))
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        store.watchers.discard(watcher)
    with contextlib.suppress(ConnectionError):
        await response.write_eof()
    return response

CUT = "CUT"
"""A watcher queue item `(CUT, raw_bytes)`: write the bytes, then drop the connection."""


def event_line(info: KindInfo, event_type: str, obj: Obj) -> bytes:
    """One watch event as a JSON line; a BOOKMARK carries only the kind and metadata."""
    if event_type == BOOKMARK:
        return _line({"type": BOOKMARK, "object": {"kind": info.kind, "apiVersion": info.api_version,
                                                   "metadata": obj["metadata"]}})
    return _line({"type": event_type, "object": present(info, obj)})

def attributes(request: web.Request, segments: list[str]) -> Attributes:
    """The request as the RBAC authorizer sees it (kube-apiserver's RequestInfo). The name is the
    path segment as sent: for a proxy it keeps its scheme and port (`https:svc:8443`), which a
    rule's `resourceNames` must then spell the same way."""
    if segments[:1] == ["api"] and len(segments) >= 3:
        group, rest = "", segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 4:
        group, rest = segments[1], segments[3:]
    else:
        return Attributes(verb=verb_of(request.method, named=True, watch=False).replace("create", "post"),
                          path=request.path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    watch = request.query.get("watch", "").lower() in ("true", "1")
    return Attributes(verb=verb_of(request.method, named=bool(name), watch=watch), path=request.path,
                      api_group=group, resource=rest[0], subresource=rest[2] if len(rest) > 2 else "",
                      namespace=namespace, name=name)


def _item_key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _continue_token(rv: int, start: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": start}).encode()).decode()


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def _line(event: Obj) -> bytes:
    return (json.dumps(event) + "\n").encode()


def object_body(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise ApiError.bad_request("the request body is not a JSON object")
    return body


def delete_options(request: web.Request, body: Any) -> Obj:
    options: Obj = dict(body) if isinstance(body, dict) else {}
    for key in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents"):
        if key in request.query:
            value: Any = request.query[key]
            if key == "gracePeriodSeconds":
                value = int(value)
            elif key == "orphanDependents":
                value = value.lower() == "true"
            options[key] = value
    return options


def selector_of(request: web.Request) -> Selector:
    return Selector.parse(request.query.get("labelSelector"), request.query.get("fieldSelector"))
