"""Following objects through their changes: watch from a resourceVersion; after a watch error
either read again and watch on from there (410 Expired and every other ERROR event or 5xx/429
answer always, as an informer does; a cut stream too with `resume=False`),
or, for a cut stream, a line that is not an event or a moment without the server, reopen the
watch from the last resourceVersion seen (`resume=True`: the server replays what came after it,
so nothing is lost and a large collection is not listed again), as an informer does.

    listing = await api.list_all(JOBSETS, "bench", label_selector="app.kubernetes.io/name=aiperf")
    async for change in watch(api, JOBSETS.path("bench"), start=listing, relist=...):
        ...   # a Listing after every re-read, an Event per change

    async with aclosing(watch_object(api, JOBSETS, "bench", jobset, what="JobSet aiperf-demo")) as versions:
        async for jobset in versions:   # `jobset` first, then each later version; Gone when it goes
            ...
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass

import aiohttp
import anyio

from aiperf.kubeapi.client import KubeApi, Listing, selectors
from aiperf.kubeapi.errors import ApiError, Gone, KubeClusterError, Unreachable
from aiperf.kubeapi.resources import Obj, Resource, uid_of

MAX_BROKEN_WATCHES = 5
"""Watches in a row that may break (cut, unreadable, unreachable) before a watch gives up."""
WATCH_TIMEOUT_S = 300
"""How long the server keeps one watch open (`timeoutSeconds`); then it is reopened."""


@dataclass(frozen=True)
class Event:
    """One change of a watched collection: `type` ADDED, MODIFIED or DELETED, and the object."""

    type: str
    object: Obj


Change = Listing | Event
Relist = Callable[[], Awaitable[Listing]]


class BrokenWatch(Exception):
    """A watch stream that is not a sequence of JSON event lines."""


class _Expired(Exception):
    """The watch history no longer reaches back to our resourceVersion (410)."""


class _WatchError(Exception):
    """The server ended the watch with an ERROR event other than 410 (a 504 from a lagging watch
    cache, a 500, a 429), or refused to open it with a 5xx or 429: read the collection again."""


async def watch(api: KubeApi, path: str, *, start: Listing, relist: Relist, label_selector: str | None = None,
                field_selector: str | None = None, what: str | None = None, resume: bool = False,
                watch_timeout_s: int = WATCH_TIMEOUT_S) -> AsyncGenerator[Change, None]:
    """The changes of the collection at `path` from `start.resource_version` on, until the
    caller stops: an `Event` per ADDED, MODIFIED or DELETED object (BOOKMARKs only move the
    resourceVersion on). A watch the server ends is reopened from the last resourceVersion
    seen. After 410 Expired, any other ERROR event (a 504 from a lagging watch cache), a 5xx or
    429 answer, and after any other watch error unless `resume`, the collection is read again
    with `relist()` (the caller diffs), that `Listing` is yielded and the watch goes on from its
    resourceVersion; with `resume` a cut or unreadable watch is reopened from the last
    resourceVersion instead. The selectors narrow the watch as they narrowed `start`.
    `KubeClusterError` naming `what` (default: the path) when `MAX_BROKEN_WATCHES` watches in a
    row break or end in an error (410 aside), or when the server refuses the watch otherwise
    (403, 404)."""
    what = what or path
    query = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(watch_timeout_s),
             **selectors(label_selector, field_selector)}
    rv, broken = start.resource_version, 0
    while True:
        try:
            async with aclosing(_stream(api, path, {**query, "resourceVersion": rv}, what)) as events:
                async for kind, obj in events:
                    broken = 0
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        yield Event(kind, obj)
            continue  # the server ended the watch: reopen it from `rv`
        except _Expired:
            pass
        except (_WatchError, Unreachable, BrokenWatch, aiohttp.ClientError, TimeoutError) as exc:
            broken += 1
            if broken >= MAX_BROKEN_WATCHES:
                raise KubeClusterError(f"watching {what} failed {broken} times in a row; last: "
                                       f"{exc or type(exc).__name__}") from None
            await anyio.sleep(min(0.1 * 2 ** broken, 5.0))  # back off before reading again
            if resume and not isinstance(exc, _WatchError):
                continue
        fresh = await relist()
        rv = fresh.resource_version
        yield fresh


async def watch_object(api: KubeApi, resource: Resource, namespace: str, first: Obj, *, what: str,
                       watch_timeout_s: int = WATCH_TIMEOUT_S) -> AsyncGenerator[Obj, None]:
    """`first` (the object as just read), then every later version of that object (same UID),
    until the caller stops (use `aclosing`). After a watch error it is read again (GET: no list
    permission needed) and that version yielded too, so a version may repeat. `Gone` (naming
    `what`) when it is deleted or replaced by a same-name object; `KubeClusterError` as `watch`."""
    name, uid = first["metadata"]["name"], uid_of(first)

    async def reread() -> Listing:
        obj = await api.get(resource, namespace, name)
        return Listing([obj] if obj is not None else [], str((obj or {}).get("metadata", {}).get("resourceVersion", "")))

    yield first
    start = Listing([first], str(first["metadata"].get("resourceVersion", "")))
    changes = watch(api, resource.path(namespace), start=start, relist=reread, what=what,
                    field_selector=f"metadata.name={name}", watch_timeout_s=watch_timeout_s)
    async with aclosing(changes):
        async for change in changes:
            current = change.items if isinstance(change, Listing) else [change.object]
            if not current or (isinstance(change, Event) and change.type == "DELETED"):
                raise Gone(f"{what} was deleted before it finished", replaced=False)
            if uid_of(current[0]) != uid:
                raise Gone(f"{what} was replaced by a new one with the same name", replaced=True)
            yield current[0]


async def _stream(api: KubeApi, path: str, query: dict[str, str], what: str) -> AsyncGenerator[tuple[str, Obj], None]:
    """(type, object) of each event of one watch, until the server ends it. `_Expired` for 410,
    `_WatchError` for another ERROR event or a 5xx/429 answer, `BrokenWatch` for a stream that is
    not JSON lines, `KubeClusterError` for another refusal."""
    response = await api.open("GET", path, query=query, stream=True)
    try:
        if response.status == 410:
            raise _Expired
        if response.status >= 500 or response.status == 429:
            raise _WatchError(f"watching {what} failed: {ApiError(response.status, await response.read())}")
        if response.status != 200:
            raise KubeClusterError(f"watching {what} failed: {ApiError(response.status, await response.read())}")
        buffer = b""
        async for chunk in response.content.iter_any():
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield _event(line, what)
        if buffer.strip():
            raise BrokenWatch(f"watch stream ended mid-line: {buffer[:80]!r}")
    finally:
        response.release()


def _event(line: bytes, what: str) -> tuple[str, Obj]:
    try:
        event = json.loads(line)
    except ValueError:
        raise BrokenWatch(f"watch sent a line that is not JSON: {line[:80]!r}") from None
    if not isinstance(event, dict):
        raise BrokenWatch(f"watch sent a line that is not an event: {line[:80]!r}")
    kind, obj = str(event.get("type")), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise _Expired
        raise _WatchError(f"watching {what} failed: {obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
    return kind, obj


__all__ = ["MAX_BROKEN_WATCHES", "WATCH_TIMEOUT_S", "BrokenWatch", "Change", "Event", "Relist", "watch",
           "watch_object"]
