"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, real API semantics.

    async with FakeKube(namespaces=["bench"]) as kube:
        api = await new_client_from_config(kube.kubeconfig_path, persist_config=False)
        ...
        assert kube.requests_for("PATCH")[0].content_type == "application/json-patch+json"

What it honours (see `fake_kube_store.Store` for the write rules):

- Namespaced and cluster-scoped objects under `/api/v1` and `/apis/GROUP/VERSION`, for the
  built-in kinds of `BUILTIN_KINDS` and any other group/version/plural (a custom resource with a
  status subresource); `register_kind` names a custom kind properly.
- POST (uid, resourceVersion, creationTimestamp, generation; 409 AlreadyExists; 404 when the
  namespace was never created), GET, LIST (labelSelector, fieldSelector on metadata.name and
  metadata.namespace), PUT (409 on a stale resourceVersion), PATCH (JSON Patch with `test`,
  422 when an op fails; merge patch; strategic merge patch as a merge patch on built-in kinds,
  415 on custom ones), DELETE (uid/resourceVersion preconditions, finalizers, ownerReference
  and namespace cascade), the `status` subresource, WATCH (`?watch=true`, JSON lines from a
  resourceVersion, 410 after `compact()`).
- `pods/log` (text set with `set_pod_log`) and `pods/proxy` (handlers set with
  `register_proxy`; 503 like an unreachable pod when none is registered).
- Errors are `Status` objects with the real reason, code and message texts.
- `requests`: every request, in order, with method, path, query, content type and body.

Limits: no admission, schema validation, defaulting beyond a few fields, or field managers;
one version per group is served; the garbage collector runs synchronously inside the delete
(Foreground and Background behave alike); log `follow` returns what is stored and ends;
no authentication (any credentials are accepted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from aiperf.testing.fake_kube_store import (
    BUILTIN_KINDS,
    NAMESPACES,
    ApiError,
    KindInfo,
    Obj,
    Selector,
    Store,
    Watcher,
    WatchEvent,
)

ProxyHandler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]
"""Answers one request proxied to a pod: gets the request and the path after `/proxy`."""

__all__ = ["ApiError", "FakeKube", "KindInfo", "ProxyHandler", "RecordedRequest"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it: `path` is URL-decoded, `body` parsed when JSON."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any


@dataclass(frozen=True)
class _Target:
    """What a resource URL names."""

    info: KindInfo
    namespace: str | None  # None: all namespaces (a list or watch on the cluster-wide path)
    name: str | None
    subresource: str | None
    subpath: str


class FakeKube:
    """The fake API server; an async context manager that serves while entered.

    `namespaces` exist from the start; `context`/`default_namespace` shape the kubeconfig
    written to `kubeconfig_path` (server `url`, no credentials).
    """

    def __init__(self, *, namespaces: Iterable[str] = (), context: str = "fake",
                 default_namespace: str | None = None, shutdown_timeout: float = 2.0) -> None:
        self.store = Store()
        self.requests: list[RecordedRequest] = []
        self._kinds: dict[tuple[str, str, str], KindInfo] = {
            (k.group, k.version, k.plural): k for k in BUILTIN_KINDS}
        self._logs: dict[tuple[str, str, str | None], str] = {}
        self._proxies: dict[tuple[str, str, str | None], ProxyHandler] = {}
        self._context, self._default_namespace = context, default_namespace
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self._tmp: Path | None = None
        self.url = ""
        self.kubeconfig_path = ""
        for ns in namespaces:
            self.add_namespace(ns)

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> FakeKube:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=self._shutdown_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self._tmp = Path(tempfile.mkdtemp(prefix="fake-kube-"))
        self.kubeconfig_path = str(self.write_kubeconfig(self._tmp / "kubeconfig"))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        for watcher in list(self.store.watchers):
            watcher.queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def write_kubeconfig(self, path: Path | str, *, context: str | None = None,
                         namespace: str | None = None) -> Path:
        """Write a kubeconfig for this server (context `context`, default namespace `namespace`)
        to `path` and return it. Only valid while the server is serving."""
        context = context or self._context
        ctx: dict[str, str] = {"cluster": "fake-kube", "user": "fake-kube"}
        if namespace or self._default_namespace:
            ctx["namespace"] = namespace or self._default_namespace or ""
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "fake-kube", "cluster": {"server": self.url}}],
            "users": [{"name": "fake-kube", "user": {}}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context,
        }
        path = Path(path)
        path.write_text(json.dumps(config, indent=2))
        return path

    # -- test helpers --------------------------------------------------------------------------

    def register_kind(self, api_version: str, plural: str, kind: str, *, namespaced: bool = True,
                      has_status: bool = True) -> KindInfo:
        """Serve a custom resource under its real kind name (otherwise guessed from the plural)."""
        group, _, version = api_version.rpartition("/")
        info = KindInfo(group, version, plural, kind, namespaced=namespaced, has_status=has_status,
                        builtin=False)
        self._kinds[(group, version, plural)] = info
        return info

    def add_namespace(self, name: str) -> Obj:
        """Create namespace `name` (as `POST /api/v1/namespaces` would)."""
        return self.store.create(NAMESPACES, "", {"metadata": {"name": name}})

    def kind(self, api_version: str, kind_or_plural: str) -> KindInfo:
        """The KindInfo served for `api_version` with this kind or plural."""
        group, _, version = api_version.rpartition("/")
        for info in self._kinds.values():
            if (info.group, info.version) == (group, version) and kind_or_plural in (info.kind, info.plural):
                return info
        return self._info(group, version, kind_or_plural.lower() + "s", namespaced=True)

    def create(self, obj: Obj) -> Obj:
        """Create `obj` directly (its apiVersion, kind and metadata.namespace say where)."""
        info = self.kind(obj["apiVersion"], obj["kind"])
        return self.store.create(info, obj["metadata"].get("namespace", ""), obj)

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        """The stored object, or None."""
        return self.store.find(self.kind(api_version, kind), namespace, name)

    def set_status(self, api_version: str, kind: str, namespace: str, name: str, status: Obj) -> Obj:
        """Replace an object's status (as a controller would), emitting MODIFIED."""
        info = self.kind(api_version, kind)
        current = self.store.get(info, namespace, name)
        current["status"] = status
        return self.store.replace(info, namespace, name, current, status=True)

    def update(self, obj: Obj) -> Obj:
        """Replace `obj` unconditionally (finalizer removal, spec edits), emitting MODIFIED."""
        info = self.kind(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        current = self.store.get(info, meta.get("namespace", ""), meta["name"])
        body = {**obj, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
        return self.store.replace(info, meta.get("namespace", ""), meta["name"], body, status=False)

    def set_pod_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """What `GET .../pods/POD/log` returns for `container` (None: the pod's only container)."""
        self._logs[(namespace, pod, container)] = text

    def register_proxy(self, namespace: str, pod: str, port: int | None, handler: ProxyHandler) -> None:
        """Answer requests to `.../pods/POD[:PORT]/proxy/...` with `handler`."""
        self._proxies[(namespace, pod, str(port) if port is not None else None)] = handler

    def compact(self) -> None:
        """Drop the watch history: a watch from an older resourceVersion gets 410 Expired."""
        self.store.compact()

    def requests_for(self, method: str | None = None, path_prefix: str = "") -> list[RecordedRequest]:
        """The recorded requests with this method (any when None) whose path starts so."""
        return [r for r in self.requests
                if (method is None or r.method == method) and r.path.startswith(path_prefix)]

    # -- HTTP ----------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        content_type = request.headers.get("Content-Type")
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        self.requests.append(RecordedRequest(request.method, request.path, dict(request.query),
                                             content_type.split(";")[0].strip() if content_type else None,
                                             body))
        try:
            return await self._dispatch(request, body, raw)
        except ApiError as exc:
            return _json(exc.status(), exc.code)

    async def _dispatch(self, request: web.Request, body: Any, raw: bytes) -> web.StreamResponse:
        segments = [s for s in request.path.split("/") if s]
        discovery = self._discovery(segments)
        if discovery is not None:
            return _json(discovery)
        target = self._target(segments)
        method, info = request.method, target.info
        if target.subresource == "proxy":
            return await self._proxy(request, target)
        if target.subresource == "log":
            if method != "GET":
                raise _method_not_allowed()
            return self._log(request, target)
        if target.subresource not in (None, "status"):
            raise ApiError.no_route()
        if target.name is None:
            if method == "GET":
                selector = _selector(request)
                if request.query.get("watch", "").lower() in ("true", "1", "t"):
                    return await self._watch(request, target, selector)
                items = self.store.list_objects(info, target.namespace, selector)
                return _json({"kind": f"{info.kind}List", "apiVersion": info.api_version,
                              "metadata": {"resourceVersion": str(self.store.current_rv)}, "items": items})
            if method == "POST":
                if target.namespace is None and info.namespaced:
                    raise _method_not_allowed()
                return _json(self.store.create(info, target.namespace or "", _object_body(body)), 201)
            if method == "DELETE":
                selector = _selector(request)
                deleted = [self.store.delete(info, o["metadata"].get("namespace", ""), o["metadata"]["name"],
                                             _delete_options(request, body))[0]
                           for o in self.store.list_objects(info, target.namespace, selector)]
                return _json({"kind": f"{info.kind}List", "apiVersion": info.api_version,
                              "metadata": {"resourceVersion": str(self.store.current_rv)}, "items": deleted})
            raise _method_not_allowed()
        ns, name, status = target.namespace or "", target.name, target.subresource == "status"
        if status and not info.has_status:
            raise ApiError.no_route()
        if method == "GET":
            return _json(self.store.get(info, ns, name))
        if method == "PUT":
            return _json(self.store.replace(info, ns, name, _object_body(body), status=status))
        if method == "PATCH":
            content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip()
            if body is None or isinstance(body, str):
                raise ApiError.bad_request("the patch body is not valid JSON")
            return _json(self.store.patch(info, ns, name, content_type, body, status=status))
        if method == "DELETE" and not status:
            obj, gone = self.store.delete(info, ns, name, _delete_options(request, body))
            if not gone:
                return _json(obj, 202)
            if info.builtin and info.kind != "Pod":
                return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": {"name": name, "group": info.group, "kind": info.plural,
                                          "uid": obj["metadata"]["uid"]}})
            return _json(obj)
        raise _method_not_allowed()

    def _info(self, group: str, version: str, plural: str, *, namespaced: bool) -> KindInfo:
        info = self._kinds.get((group, version, plural))
        if info is not None:
            return info
        singular = plural[:-1] if plural.endswith("s") else plural
        return KindInfo(group, version, plural, singular[:1].upper() + singular[1:], namespaced=namespaced,
                        has_status=True, builtin=False)

    def _target(self, segments: list[str]) -> _Target:
        if len(segments) >= 3 and segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 4 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise ApiError.no_route()
        if not group and rest[0] == "namespaces" and (len(rest) <= 2 or rest[2] in ("status", "finalize")):
            return _Target(NAMESPACES, None, rest[1] if len(rest) > 1 else None,
                           rest[2] if len(rest) > 2 else None, "")
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
            info = self._info(group, version, rest[0], namespaced=True)
            if not info.namespaced:
                raise ApiError.no_route()
        else:
            namespace = None
            info = self._info(group, version, rest[0], namespaced=False)
            if info.namespaced and len(rest) > 1:
                raise ApiError.no_route()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return _Target(info, namespace, name, sub, "/" + "/".join(rest[3:]))

    def _discovery(self, segments: list[str]) -> Obj | None:
        if segments == ["version"]:
            return {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake", "gitCommit": "0" * 40,
                    "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23",
                    "compiler": "gc", "platform": "linux/amd64"}
        if segments == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.removeprefix("http://")}]}
        groups = sorted({(k.group, k.version) for k in self._kinds.values() if k.group}
                        | {(k[0], k[1]) for k in self._stored_groups()})
        if segments == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                 "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}} for g, v in groups]}
        if segments == ["api", "v1"] or (len(segments) == 3 and segments[0] == "apis"):
            group, version = ("", "v1") if segments[0] == "api" else (segments[1], segments[2])
            if group and (group, version) not in groups:
                raise ApiError.no_route()
            resources: list[Obj] = []
            for k in self._kinds.values():
                if (k.group, k.version) != (group, version):
                    continue
                resources.append({"name": k.plural, "singularName": k.kind.lower(),
                                  "namespaced": k.namespaced,
                                  "kind": k.kind, "verbs": ["create", "delete", "deletecollection", "get",
                                                            "list", "patch", "update", "watch"]})
                if k.has_status:
                    resources.append({"name": f"{k.plural}/status", "singularName": "", "namespaced":
                                      k.namespaced, "kind": k.kind, "verbs": ["get", "patch", "update"]})
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version, "resources": resources}
        return None

    def _stored_groups(self) -> set[tuple[str, str]]:
        return {(o["apiVersion"].rpartition("/")[0], o["apiVersion"].rpartition("/")[2])
                for _, o in self.store.all_objects() if "/" in o.get("apiVersion", "")}

    async def _watch(self, request: web.Request, target: _Target, selector: Selector) -> web.StreamResponse:
        info = target.info
        watcher = Watcher(info.group, info.plural, target.namespace, selector)
        rv_param = request.query.get("resourceVersion", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            if rv_param in ("", "0"):
                backlog: list[WatchEvent] = [
                    WatchEvent(int(o["metadata"]["resourceVersion"]), "ADDED", info.group, info.plural,
                               o["metadata"].get("namespace", ""), o)
                    for o in self.store.list_objects(info, target.namespace, selector)]
            else:
                backlog = self.store.events_since(watcher, int(rv_param))
        except (ApiError, ValueError) as exc:
            error = (exc if isinstance(exc, ApiError)
                     else ApiError.bad_request(f"invalid resourceVersion {rv_param}"))
            await response.write(_line({"type": "ERROR", "object": error.status()}))
            return response
        self.store.watchers.add(watcher)
        timeout = float(request.query["timeoutSeconds"]) if request.query.get("timeoutSeconds") else None
        try:
            for event in backlog:
                await response.write(_line({"type": event.type, "object": event.obj}))
            deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
            while True:
                wait = 0.5 if deadline is None else min(0.5, deadline - asyncio.get_running_loop().time())
                if wait <= 0:
                    break
                try:
                    event_or_stop = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    continue
                if event_or_stop is None:
                    break
                await response.write(_line({"type": event_or_stop.type, "object": event_or_stop.obj}))
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.watchers.discard(watcher)
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    def _log(self, request: web.Request, target: _Target) -> web.StreamResponse:
        ns, pod_name = target.namespace or "", target.name or ""
        pod = self.store.get(target.info, ns, pod_name)
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = request.query.get("container")
        if container is None and len(containers) > 1:
            raise ApiError.bad_request(f"a container name must be specified for pod {pod_name}, "
                                       "choose one of: "
                                       f"[{' '.join(containers)}]")
        if container is not None and containers and container not in containers:
            raise ApiError.bad_request(f"container {container} is not valid for pod {pod_name}")
        key_container = container or (containers[0] if containers else None)
        text = self._logs.get((ns, pod_name, key_container))
        if text is None:
            text = self._logs.get((ns, pod_name, None), "")
        tail = request.query.get("tailLines")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
        return web.Response(text=text, content_type="text/plain")

    async def _proxy(self, request: web.Request, target: _Target) -> web.StreamResponse:
        if target.info.plural != "pods" or target.name is None:
            raise ApiError.no_route()
        parts = target.name.split(":")
        pod, port = (parts[-2], parts[-1]) if len(parts) >= 2 else (parts[0], None)
        ns = target.namespace or ""
        self.store.get(target.info, ns, pod)
        handler = self._proxies.get((ns, pod, port)) or self._proxies.get((ns, pod, None))
        if handler is None:
            raise ApiError(503, "ServiceUnavailable", f"error trying to reach service: dial tcp "
                           f"10.0.0.1:{port or 80}: connect: connection refused")
        return await handler(request, target.subpath)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def _line(event: Obj) -> bytes:
    return (json.dumps(event) + "\n").encode()


def _object_body(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise ApiError.bad_request("the request body is not a JSON object")
    return body


def _delete_options(request: web.Request, body: Any) -> Obj:
    options: Obj = dict(body) if isinstance(body, dict) else {}
    if "propagationPolicy" in request.query:
        options["propagationPolicy"] = request.query["propagationPolicy"]
    return options


def _method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource")


def _selector(request: web.Request) -> Selector:
    return Selector.parse(request.query.get("labelSelector"), request.query.get("fieldSelector"))
