"""Resource types and the URL paths of their objects.

    PODS.path("bench", "p-0", "log")        # /api/v1/namespaces/bench/pods/p-0/log
    JOBSETS.path(None)                      # /apis/jobset.x-k8s.io/v1alpha2/jobsets (every namespace)
    resource_of({"apiVersion": "v1", "kind": "ConfigMap", ...}).plural   # configmaps
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

Obj = dict[str, Any]
"""A Kubernetes object (or any JSON object of the API) as plain data."""


@dataclass(frozen=True)
class Resource:
    """A resource type: its `api_version` (`v1`, `group/version`), `kind` and `plural`, and
    whether its objects live in a namespace."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, *sub: str) -> str:
        """The URL path of object `name` (its collection when None) in `namespace` (every
        namespace when None), then `sub` (e.g. `status`, `log`, `proxy`). A name may carry a
        port (`pod:9091`, for the proxy); every part is quoted."""
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        parts = [base]
        if namespace is not None and self.namespaced:
            parts += ["namespaces", quote(namespace, safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=":"))
        parts += [quote(s, safe="") for s in sub]
        return "/".join(parts)


NAMESPACES = Resource("v1", "Namespace", "namespaces", namespaced=False)
PODS = Resource("v1", "Pod", "pods")
EVENTS = Resource("v1", "Event", "events")
SERVICES = Resource("v1", "Service", "services")
SECRETS = Resource("v1", "Secret", "secrets")
CONFIG_MAPS = Resource("v1", "ConfigMap", "configmaps")
SERVICE_ACCOUNTS = Resource("v1", "ServiceAccount", "serviceaccounts")
ROLES = Resource("rbac.authorization.k8s.io/v1", "Role", "roles")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings")
JOBSETS = Resource("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets")

_KNOWN = {r.kind: r for r in (NAMESPACES, PODS, EVENTS, SERVICES, SECRETS, CONFIG_MAPS, SERVICE_ACCOUNTS,
                              ROLES, ROLE_BINDINGS, JOBSETS)}


def resource_of(obj: Mapping[str, Any]) -> Resource:
    """The resource type of `obj` (its `apiVersion` and `kind`): a known one, else the plural
    Kubernetes derives for a custom kind (lowercase, plus `s`)."""
    kind, api_version = str(obj["kind"]), str(obj["apiVersion"])
    known = _KNOWN.get(kind)
    if known is not None and known.api_version == api_version:
        return known
    return Resource(api_version, kind, kind.lower() + "s")


def proxy_path(resource: Resource, namespace: str, name: str, port: int | str, path: str = "") -> str:
    """The API server's proxy to port `port` of pod or service `name`, then `path` (which keeps
    its own slashes and query): `/api/v1/namespaces/NS/pods/NAME:PORT/proxy/api/status`."""
    return resource.path(namespace, f"{name}:{port}", "proxy") + path


def uid_of(obj: Mapping[str, Any]) -> str:
    """`metadata.uid` of `obj` (empty when unset)."""
    return str((obj.get("metadata") or {}).get("uid") or "")


def leaving(live: Mapping[str, Any] | None, uid: str) -> bool:
    """The object read as `live` (None: not found) is gone, replaced (another UID) or being
    deleted (deletionTimestamp set, its finalizers not yet released): no longer the live one of
    `uid`."""
    return live is None or uid_of(live) != uid or bool(live["metadata"].get("deletionTimestamp"))


def fenced(uid: str, *ops: Obj) -> list[Obj]:
    """A JSON Patch whose first op tests `metadata.uid`: applied only to the object of `uid`,
    never to a same-name replacement (the server answers 422, `ApiError.lost_race`)."""
    return [{"op": "test", "path": "/metadata/uid", "value": uid}, *ops]


__all__ = ["CONFIG_MAPS", "EVENTS", "JOBSETS", "NAMESPACES", "PODS", "ROLES", "ROLE_BINDINGS", "SECRETS",
           "SERVICES", "SERVICE_ACCOUNTS", "Obj", "Resource", "fenced", "leaving", "proxy_path", "resource_of",
           "uid_of"]
