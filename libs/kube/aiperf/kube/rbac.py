"""Role and RoleBinding `aiperf-<name>`: least privilege for the run's pods.

Controller and worker pods share one ServiceAccount, and its token is mounted in every
container, so a worker holds whatever the controller holds. The only write verb is `patch`, on
the run's own custom resource (and its status) and JobSet: everything a pod writes is an
annotation or a status patch. No `create` anywhere: that would let any pod start a JobSet, and
with it arbitrary containers, under this account. `RULES` is pinned by a test.
"""

from __future__ import annotations

from typing import Any

from aiperf.kube.crd_model import API_GROUP
from aiperf.kube.metadata import object_meta
from aiperf.kube.names import jobset_name
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


def build_role(settings: KubeSettings) -> dict[str, Any]:
    """The Role granting exactly `RULES` in the run's namespace."""
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "Role",
        "metadata": object_meta(settings, jobset_name(settings.name)),
        "rules": [{"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}
                  for group, resources, verbs in RULES],
    }


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
