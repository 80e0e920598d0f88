"""`KubeApi`: one API server, spoken to over one aiohttp session. Objects are plain dicts.

    async with await connect(kubeconfig=None, context=None) as api:      # aiperf.kubeapi.config
        jobset = await api.get(JOBSETS, "bench", "aiperf-demo")          # None when there is none
        await api.patch(JOBSETS, "bench", "aiperf-demo", fenced(uid, {"op": "add", ...}))
        await api.delete(JOBSETS, "bench", "aiperf-demo", uid=uid)       # UID precondition

Every call raises `Unreachable` when no answer came and `ApiError` for an error status (`get`
answers None for 404, `delete` False); callers decide what a status means. Requests carry the
credentials of the transport: a kubeconfig's (through kubernetes_asyncio's `ApiClient`, which
also keeps exec-plugin tokens fresh) or a pod's ServiceAccount (`aiperf.kubeapi.incluster`).
`session`, `url` and `auth_headers` are public for what the API server only proxies (a pod's
WebSocket, a service's HTTP): they use the same session, TLS settings and credentials.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
from yarl import URL  # pants: no-infer-dep (yarl is aiohttp's own requirement)

from aiperf.kubeapi.errors import ApiError, Unreachable
from aiperf.kubeapi.resources import EVENTS, PODS, Obj, Resource, resource_of

if TYPE_CHECKING:  # kubernetes_asyncio takes a second to import: only kubeconfig clients pay it
    from kubernetes_asyncio.client import ApiClient

JSON, JSON_PATCH, MERGE_PATCH = "application/json", "application/json-patch+json", "application/merge-patch+json"
PAGE_SIZE = 500
"""Objects per page of a LIST."""


class Transport(Protocol):
    """Where requests go and with which credentials (see the module doc)."""

    @property
    def host(self) -> str:
        """The API server's URL."""
        ...

    @property
    def proxy(self) -> str | None:
        """The HTTP proxy in front of it, if any."""
        ...

    @property
    def hint(self) -> str:
        """Appended to `Unreachable` messages: what the user can check (e.g. the kubeconfig flags)."""
        ...

    def session(self) -> aiohttp.ClientSession:
        """The session every request of this client uses."""
        ...

    async def auth_headers(self) -> dict[str, str]:
        """The headers that authenticate one request (read anew each time: tokens rotate)."""
        ...

    async def close(self) -> None:
        """Close the session (and whatever else the transport holds)."""
        ...


@dataclass(frozen=True)
class Listing:
    """The objects of one LIST (every page) and the resourceVersion to watch from."""

    items: list[Obj]
    resource_version: str


class KubeApi:
    """A typed client of one API server over `transport` (see the module doc). `timeout_s`
    bounds each request (None: no bound; watches then last as long as the server keeps them).
    An async context manager: leaving it closes the transport."""

    def __init__(self, transport: Transport, *, timeout_s: float | None = None) -> None:
        self._transport, self._timeout_s = transport, timeout_s

    @classmethod
    def over(cls, client: ApiClient) -> KubeApi:
        """A client over kubernetes_asyncio's `client` (its session, TLS settings, credentials
        and proxy); closing it closes `client`."""
        return cls(_ApiClientTransport(client))

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the transport's session."""
        await self._transport.close()

    @property
    def host(self) -> str:
        """The API server's URL (`https://host:port`)."""
        return self._transport.host

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session requests go through (for proxied WebSockets and streams)."""
        return self._transport.session()

    @property
    def proxy(self) -> str | None:
        """The HTTP proxy in front of the API server, if any."""
        return self._transport.proxy

    async def auth_headers(self) -> dict[str, str]:
        """The headers that authenticate a request of this client."""
        return await self._transport.auth_headers()

    def url(self, path: str) -> str:
        """The absolute URL of `path` on the API server."""
        return self.host.rstrip("/") + path

    # -- raw requests ------------------------------------------------------------------------

    async def open(self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None,
                   content_type: str = JSON, accept: str = JSON, stream: bool = False) -> aiohttp.ClientResponse:
        """Send one request; the response, unread, whatever its status (the caller releases
        it). `stream`: no deadline (a watch, a download). Raises `Unreachable` without an answer."""
        headers = {**await self._transport.auth_headers(), "Accept": accept}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body), content_type
        timeout = aiohttp.ClientTimeout(total=None if stream else self._timeout_s)
        try:
            return await self._transport.session().request(
                method, URL(self.url(path), encoded=True), params=dict(query or {}), data=data, headers=headers,
                proxy=self._transport.proxy, timeout=timeout)
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise self.unreachable(exc) from None

    def unreachable(self, exc: BaseException) -> Unreachable:
        """The `Unreachable` for a request that failed with `exc`."""
        hint = f"; {self._transport.hint}" if self._transport.hint else ""
        return Unreachable(f"cannot reach the Kubernetes API server at {self.host}: "
                           f"{exc or type(exc).__name__}{hint}")

    async def body_of(self, response: aiohttp.ClientResponse) -> bytes:
        """`response`'s whole body, the response released. Raises `ApiError` for an error
        status, `Unreachable` when the body cannot be read."""
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self.unreachable(exc) from None
        finally:
            response.release()
        if response.status >= 400:
            raise ApiError(response.status, data)
        return data

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None,
                      content_type: str = JSON) -> Any:
        """One request; the decoded JSON answer (`{}` for an empty one). Raises `ApiError` for
        an error status, `Unreachable` without an answer."""
        data = await self.body_of(await self.open(method, path, query=query, body=body, content_type=content_type))
        return json.loads(data) if data.strip() else {}

    # -- objects -----------------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        """The object, or None when there is none (404)."""
        try:
            found: Obj = await self.request("GET", resource.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return found

    async def list_all(self, resource: Resource | str, namespace: str | None = None, *,
                   label_selector: str | None = None, field_selector: str | None = None) -> Listing:
        """Every object of `resource` in `namespace` (every namespace when None; a path: that
        collection) narrowed by the selectors, all pages; a continue token that expired
        mid-way (410) starts the list over. `ApiError` 404 when the type is not served."""
        path = resource if isinstance(resource, str) else resource.path(namespace)
        query = {"limit": str(PAGE_SIZE), **selectors(label_selector, field_selector)}
        items: list[Obj] = []
        while True:
            try:
                page: Obj = await self.request("GET", path, query=query)
            except ApiError as exc:
                if exc.status == 410 and "continue" in query:
                    items, query = [], {k: v for k, v in query.items() if k != "continue"}
                    continue
                raise
            items += page.get("items") or []
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return Listing(items, str(meta.get("resourceVersion") or ""))
            query["continue"] = str(meta["continue"])

    async def create(self, obj: Mapping[str, Any]) -> Obj:
        """Create `obj` (apiVersion, kind, metadata.name and, when namespaced, namespace set);
        the object as stored."""
        created: Obj = await self.request("POST", resource_of(obj).path(obj["metadata"].get("namespace")),
                                          body=dict(obj))
        return created

    async def patch(self, resource: Resource, namespace: str | None, name: str, ops: list[Obj], *,
                    status: bool = False) -> Obj:
        """Apply the JSON Patch `ops` (to the status subresource when `status`); the object as
        patched. Fence it with `fenced(uid, ...)` or a `test` op: a lost race is `ApiError`
        with `lost_race`."""
        path = resource.path(namespace, name, *(("status",) if status else ()))
        patched: Obj = await self.request("PATCH", path, body=ops, content_type=JSON_PATCH)
        return patched

    async def delete(self, resource: Resource, namespace: str | None, name: str, *, uid: str,
                     propagation: str = "Background") -> bool:
        """Delete the object if it still has `uid` (a precondition the server checks) with
        `propagation` (Background, Foreground, Orphan). True when deleted or being deleted,
        False when it is not there (404); `ApiError` with `lost_race` when another object holds
        the name now (409)."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation,
                "preconditions": {"uid": uid}}
        try:
            await self.request("DELETE", resource.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def events(self, namespace: str) -> list[Obj]:
        """The core/v1 Events of `namespace` (callers pick the objects they care about), oldest
        first by their last occurrence."""
        return sorted((await self.list_all(EVENTS, namespace)).items, key=event_time)

    async def log(self, namespace: str, pod: str, *, container: str | None = None, tail: int | None = None) -> str:
        """The log of `container` of `pod` (None: its only container), its last `tail` lines
        when given. `ApiError` 404 for no such pod, 400 when the container must be named."""
        query = {k: v for k, v in (("container", container), ("tailLines", None if tail is None else str(tail)))
                 if v is not None}
        data = await self.body_of(await self.open("GET", PODS.path(namespace, pod, "log"), query=query, accept="*/*",
                                                  stream=True))
        return data.decode("utf-8", "replace")


def selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    """The query parameters of the selectors that are set."""
    query = {"labelSelector": label_selector, "fieldSelector": field_selector}
    return {k: v for k, v in query.items() if v}


def event_time(event: Mapping[str, Any]) -> str:
    """When an Event last happened (RFC 3339): lastTimestamp, else eventTime, else creation."""
    return str(event.get("lastTimestamp") or event.get("eventTime") or
               (event.get("metadata") or {}).get("creationTimestamp") or "")


class _ApiClientTransport:
    """kubernetes_asyncio's `ApiClient`: its session, TLS settings, proxy and credentials."""

    hint = "check --kubeconfig/--kube-context"

    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self.host = str(client.configuration.host)
        self.proxy = client.rest_client.proxy

    def session(self) -> aiohttp.ClientSession:
        session: aiohttp.ClientSession = self._client.rest_client.pool_manager
        return session

    async def auth_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        await self._client.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    async def close(self) -> None:
        await self._client.close()


__all__ = ["JSON", "JSON_PATCH", "MERGE_PATCH", "KubeApi", "Listing", "Transport", "event_time",
           "selectors"]
