"""A small, typed client of the Kubernetes API: get, list, watch (re-read after any watch error),
create, fenced JSON Patch, delete with a UID precondition, events, pod logs and the API server's
proxy, over a kubeconfig or a pod's ServiceAccount. Objects are plain dicts (`Obj`). It knows
nothing of aiperf: the aiperf runs on top of it live in `aiperf.kuberun`.
"""

from aiperf.kubeapi.client import JSON, JSON_PATCH, MERGE_PATCH, KubeApi, Listing, event_time, selectors
from aiperf.kubeapi.config import (
    client_of,
    connect,
    context_namespace,
    kubeconfig_paths,
    load_configuration,
    resolve_namespace,
)
from aiperf.kubeapi.errors import ApiError, Gone, KubeClusterError, KubeError, Unreachable
from aiperf.kubeapi.incluster import InClusterConfig, InClusterError, in_cluster
from aiperf.kubeapi.resources import (
    CONFIG_MAPS,
    EVENTS,
    JOBSETS,
    NAMESPACES,
    PODS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    Obj,
    Resource,
    fenced,
    leaving,
    proxy_path,
    resource_of,
    uid_of,
)
from aiperf.kubeapi.watch import MAX_BROKEN_WATCHES, BrokenWatch, Change, Event, watch, watch_object

__all__ = [
    "CONFIG_MAPS", "EVENTS", "JOBSETS", "JSON", "JSON_PATCH", "MAX_BROKEN_WATCHES", "MERGE_PATCH", "NAMESPACES",
    "PODS", "ROLES", "ROLE_BINDINGS", "SECRETS", "SERVICES", "SERVICE_ACCOUNTS", "ApiError", "BrokenWatch",
    "Change", "Event", "Gone", "InClusterConfig", "InClusterError", "KubeApi", "KubeClusterError", "KubeError",
    "Listing", "Obj", "Resource", "Unreachable", "client_of", "connect", "context_namespace", "event_time",
    "fenced", "in_cluster", "kubeconfig_paths", "leaving", "load_configuration", "proxy_path", "resolve_namespace",
    "resource_of", "selectors", "uid_of", "watch", "watch_object",
]
