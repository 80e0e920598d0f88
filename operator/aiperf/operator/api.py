"""Thin async calls to the API server over an injected kubernetes_asyncio `ApiClient`.

Every function raises `ApiException` for an error answer (callers decide what a status means;
`lost_race` names the ones that mean "someone wrote first"). Objects are plain dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.kube.client import api_status

Obj = dict[str, Any]
JSON, JSON_PATCH, MERGE_PATCH = "application/json", "application/json-patch+json", "application/merge-patch+json"
_PLURALS = {"Role": "roles", "RoleBinding": "rolebindings", "ConfigMap": "configmaps", "JobSet": "jobsets",
            "ServiceAccount": "serviceaccounts", "AIPerfJob": "aiperfjobs", "AIPerfSweep": "aiperfsweeps",
           "Pod": "pods", "Event": "events"}


def plural(kind: str) -> str:
    """The resource (plural) of `kind`."""
    return _PLURALS.get(kind, kind.lower() + "s")


def path(api_version: str, kind: str, namespace: str, name: str | None = None, sub: str | None = None) -> str:
    """The URL path of a namespaced object (or its collection when `name` is None)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    out = f"{base}/namespaces/{quote(namespace, safe='')}/{plural(kind)}"
    if name is not None:
        out += "/" + quote(name, safe="")
    if sub is not None:
        out += "/" + sub
    return out


async def call(api: ApiClient, method: str, url: str, *, body: Any = None, content_type: str = JSON,
               query: Mapping[str, str] | None = None) -> Any:
    """One request; the decoded JSON answer. Raises `ApiException` on an error status."""
    return await api.call_api(url, method, query_params=list((query or {}).items()),
                              header_params={"Accept": JSON, "Content-Type": content_type}, body=body,
                              auth_settings=["BearerToken"], _return_http_data_only=True,
                              response_types_map={200: "object", 201: "object", 202: "object"})


async def get(api: ApiClient, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
    """The object, or None when there is none (404)."""
    try:
        found: Obj = await call(api, "GET", path(api_version, kind, namespace, name))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def create(api: ApiClient, obj: Mapping[str, Any]) -> Obj:
    """Create `obj` (apiVersion, kind, metadata.name and namespace set); the stored object."""
    meta = obj["metadata"]
    created: Obj = await call(api, "POST", path(obj["apiVersion"], obj["kind"], meta["namespace"]), body=obj)
    return created


async def json_patch(api: ApiClient, api_version: str, kind: str, namespace: str, name: str,
                     ops: list[Obj], *, status: bool = False) -> Obj:
    """Apply the JSON Patch `ops` (to the status subresource when `status`); the patched object."""
    url = path(api_version, kind, namespace, name, "status" if status else None)
    patched: Obj = await call(api, "PATCH", url, body=ops, content_type=JSON_PATCH)
    return patched


async def delete(api: ApiClient, api_version: str, kind: str, namespace: str, name: str, *, uid: str,
                 propagation: str = "Background") -> bool:
    """Delete the object if it still has `uid` (a precondition the server checks). True when
    deleted or already being deleted; False when it is gone or another object holds the name."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation,
            "preconditions": {"uid": uid}}
    try:
        await call(api, "DELETE", path(api_version, kind, namespace, name), body=body)
    except ApiException as exc:
        if exc.status in (404, 409):
            return False
        raise
    return True


def lost_race(exc: ApiException) -> bool:
    """True when the server refused a write because its precondition no longer held: a stale
    resourceVersion (409 Conflict) or a failed JSON Patch `test` (422 naming the test)."""
    code, _, message = api_status(exc)
    return code == 409 or (code == 422 and "test" in message and "failed" in message)


def describe(exc: ApiException) -> str:
    """`409 Conflict: message` for a log line or an error."""
    code, reason, message = api_status(exc)
    return f"{code} {reason}: {message}"


async def list_objects(api: ApiClient, api_version: str, kind: str, namespace: str, *,
                       label_selector: str | None = None) -> list[Obj]:
    """The objects of `kind` in `namespace` (narrowed by `label_selector`)."""
    query = {"labelSelector": label_selector} if label_selector else None
    found = await call(api, "GET", path(api_version, kind, namespace), query=query)
    return list(found.get("items") or [])
