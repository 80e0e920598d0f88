"""ServiceAccount, Role and RoleBinding `aiperf-<name>`: least privilege for the run's pods.

Controller and worker pods share one ServiceAccount, the run's own unless the user names one
(never the namespace's `default`, which other workloads share), and its token is mounted in
every container, so a worker holds whatever the controller holds. Rules on objects whose names
the run knows (its custom resource, ConfigMap and JobSet) carry `resourceNames`: a pod can read
or patch its own run's objects only (list and watch then need a `metadata.name` field
selector, as Kubernetes requires for named rules). The only write verb is `patch`, on
the run's own custom resource (and its status) and JobSet: everything a pod writes is an
annotation or a status patch. No `create` anywhere: that would let any pod start a JobSet, and
with it arbitrary containers, under this account. `RULES` is pinned by a test.
"""

from __future__ import annotations

from typing import Any

from aiperf.kube.metadata import object_meta
from aiperf.kube.names import API_GROUP, config_map_name, jobset_name
from aiperf.kube.settings import KubeSettings

AIPERF_API_GROUP = API_GROUP
JOBSET_API_GROUP = "jobset.x-k8s.io"
RBAC_API_GROUP = "rbac.authorization.k8s.io"

_READ = ("get", "list", "watch")
_READ_PATCH = ("get", "list", "watch", "patch")

RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (AIPERF_API_GROUP, ("aiperfjobs", "aiperfjobs/status"), _READ_PATCH),
    ("", ("configmaps",), _READ),
    ("", ("pods", "pods/log"), _READ),
    ("", ("services", "endpoints"), _READ),
    ("", ("events",), _READ),
    ("batch", ("jobs",), _READ),
    (JOBSET_API_GROUP, ("jobsets",), _READ_PATCH),
    (JOBSET_API_GROUP, ("jobsets/status",), _READ),
)
"""(apiGroup, resources, verbs) of every rule, in manifest order."""


def resource_names(settings: KubeSettings, resources: tuple[str, ...]) -> list[str]:
    """The `resourceNames` of the rule on `resources`: the run's own object, or [] (any) for
    objects whose names the run does not know (pods, jobs, events, the JobSet's service)."""
    named = {"aiperfjobs": settings.name, "aiperfjobs/status": settings.name,
             "configmaps": config_map_name(settings.name),
             "jobsets": jobset_name(settings.name), "jobsets/status": jobset_name(settings.name)}
    names = {named.get(resource) for resource in resources}
    return [names.pop()] if len(names) == 1 and None not in names else []  # type: ignore[list-item]


def build_role(settings: KubeSettings) -> dict[str, Any]:
    """The Role granting exactly `RULES` in the run's namespace, named where `resource_names`
    knows the object."""
    rules = []
    for group, resources, verbs in RULES:
        rule: dict[str, Any] = {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}
        if names := resource_names(settings, resources):
            rule["resourceNames"] = names
        rules.append(rule)
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "Role",
        "metadata": object_meta(settings, jobset_name(settings.name)),
        "rules": rules,
    }


def build_service_account(settings: KubeSettings) -> dict[str, Any] | None:
    """The run's own ServiceAccount, or None when `settings.service_account` names one."""
    if settings.service_account is not None:
        return None
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": object_meta(settings, settings.service_account_name)}


def build_role_binding(settings: KubeSettings) -> dict[str, Any]:
    """The RoleBinding of that Role to the pods' ServiceAccount."""
    name = jobset_name(settings.name)
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(settings, name),
        "subjects": [{"kind": "ServiceAccount", "name": settings.service_account_name,
                      "namespace": settings.namespace}],
        "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "Role", "name": name},
    }
