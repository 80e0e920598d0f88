"""Which resource types the fake API server serves, and the discovery documents that say so.

Built-in kinds are fixed (`BUILTIN_KINDS`); every other kind exists only while a
CustomResourceDefinition serves it: `Kinds.sync_crd` registers each served version of a CRD
(scope, names, schema, status/scale subresources) and `Kinds.drop_crd` removes them. Discovery
(`/api`, `/apis`, `/apis/G`, `/apis/G/V`, and the aggregated `apidiscovery.k8s.io/v2` forms) is
computed from the registry, so a CRD created through the API shows up there at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from aiperf.testing.fake_kube_api import FieldError, KindInfo, Obj

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

BUILTIN_KINDS: tuple[KindInfo, ...] = (
    KindInfo("", "v1", "namespaces", "Namespace", namespaced=False, has_status=True, singular="namespace",
             short_names=("ns",), subresources=("finalize",), returns_deleted=True),
    KindInfo("", "v1", "pods", "Pod", has_status=True, singular="pod", short_names=("po",),
             categories=("all",), subresources=("log", "proxy", "exec", "binding", "eviction"),
             returns_deleted=True),
    KindInfo("", "v1", "services", "Service", has_status=True, singular="service", short_names=("svc",),
             categories=("all",), subresources=("proxy",), returns_deleted=True),
    KindInfo("", "v1", "configmaps", "ConfigMap", singular="configmap", short_names=("cm",)),
    KindInfo("", "v1", "secrets", "Secret", singular="secret"),
    KindInfo("", "v1", "events", "Event", singular="event", short_names=("ev",)),
    KindInfo("", "v1", "serviceaccounts", "ServiceAccount", singular="serviceaccount", short_names=("sa",),
             subresources=("token",)),
    KindInfo("batch", "v1", "jobs", "Job", has_status=True, singular="job", categories=("all",),
             returns_deleted=True),
    KindInfo("rbac.authorization.k8s.io", "v1", "roles", "Role", singular="role"),
    KindInfo("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", singular="rolebinding"),
    KindInfo("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False,
             singular="clusterrole"),
    KindInfo("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False,
             singular="clusterrolebinding"),
    KindInfo("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
             namespaced=False, has_status=True, singular="customresourcedefinition",
             short_names=("crd", "crds"), returns_deleted=True),
    KindInfo("events.k8s.io", "v1", "events", "Event", singular="event", short_names=("ev",),
             store_group="", store_plural="events"),
    KindInfo("", "v1", "resourcequotas", "ResourceQuota", has_status=True, singular="resourcequota",
             short_names=("quota",)),
)

NAMESPACES = BUILTIN_KINDS[0]
PODS = BUILTIN_KINDS[1]
SERVICES = BUILTIN_KINDS[2]
CRDS = BUILTIN_KINDS[12]

_SUBRESOURCE_DISCOVERY: dict[str, tuple[str, str, str, list[str]]] = {
    # name: (group, version, kind, verbs) of the subresource's own type ("" = the parent's)
    "status": ("", "", "", ["get", "patch", "update"]),
    "scale": ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
    "log": ("", "", "", ["get"]),
    "proxy": ("", "", "PodProxyOptions", ["create", "delete", "get", "patch", "update"]),
    "exec": ("", "", "PodExecOptions", ["create", "get"]),
    "binding": ("", "", "Binding", ["create"]),
    "eviction": ("policy", "v1", "Eviction", ["create"]),
    "finalize": ("", "", "", ["update"]),
    "token": ("authentication.k8s.io", "v1", "TokenRequest", ["create"]),
}

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key, highest priority first when sorted ascending: GA > beta > alpha, newer first,
    then versions that do not look like Kubernetes versions, alphabetically."""
    m = _KUBE_VERSION.match(version)
    if m is None:
        return (3, 0, 0, version)
    major, level, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    return ({None: 0, "beta": 1, "alpha": 2}[level], -major, -minor, "")


class Kinds:
    """The registry of served resource types, keyed by (group, version, plural)."""

    def __init__(self, builtins: Iterable[KindInfo] = BUILTIN_KINDS) -> None:
        self._by_gvp: dict[tuple[str, str, str], KindInfo] = {(k.group, k.version, k.plural): k
                                                              for k in builtins}

    def lookup(self, group: str, version: str, plural: str) -> KindInfo | None:
        """The type served at /apis/GROUP/VERSION/PLURAL (or /api/v1/PLURAL), or None."""
        return self._by_gvp.get((group, version, plural))

    def by_kind(self, api_version: str, kind_or_plural: str) -> KindInfo | None:
        """The type with this apiVersion and kind (or plural), or None."""
        group, _, version = api_version.rpartition("/")
        for info in self._by_gvp.values():
            if (info.group, info.version) == (group, version) and kind_or_plural in (info.kind, info.plural):
                return info
        return None

    def all(self) -> list[KindInfo]:
        return list(self._by_gvp.values())

    def storage_info(self, group: str, plural: str) -> KindInfo | None:
        """The type whose objects are stored under (group, plural) at its storage version
        (what the garbage collector and namespace cleanup use)."""
        found = [k for k in self._by_gvp.values() if (k.group, k.plural) == (group, plural)]
        if not found:
            return None
        stored = [k for k in found if k.is_storage]
        return (stored or found)[0]

    def sync_crd(self, crd: Obj) -> None:
        """Serve every served version of `crd` (replacing what it served before)."""
        name = crd["metadata"]["name"]
        self.drop_crd(name)
        spec = crd["spec"]
        names = spec["names"]
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            subresources = version.get("subresources") or {}
            scale = subresources.get("scale")
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            info = KindInfo(
                spec["group"], version["name"], names["plural"], names["kind"],
                namespaced=spec.get("scope") == "Namespaced", has_status="status" in subresources,
                builtin=False, singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
                has_scale=scale is not None,
                scale_paths=(scale["specReplicasPath"], scale["statusReplicasPath"],
                             scale.get("labelSelectorPath", "")) if scale else KindInfo.scale_paths,
                crd=name, schema=schema, returns_deleted=True, is_storage=bool(version.get("storage")))
            self._by_gvp[(info.group, info.version, info.plural)] = info

    def drop_crd(self, name: str) -> None:
        """Stop serving every version of CRD `name`."""
        for key in [k for k, info in self._by_gvp.items() if info.crd == name]:
            del self._by_gvp[key]

    # -- discovery -----------------------------------------------------------------------------

    def group_versions(self) -> dict[str, list[str]]:
        """Every API group but the core one, with its versions, preferred (highest priority) first."""
        groups: dict[str, set[str]] = {}
        for info in self._by_gvp.values():
            if info.group:
                groups.setdefault(info.group, set()).add(info.version)
        return {g: sorted(vs, key=version_priority) for g, vs in sorted(groups.items())}

    def api_group(self, group: str) -> Obj | None:
        """The `APIGroup` document of `/apis/GROUP`, or None when nothing serves it."""
        versions = self.group_versions().get(group)
        if not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                "preferredVersion": entries[0]}

    def api_group_list(self) -> Obj:
        """`/apis`: the `APIGroupList`."""
        groups = []
        for group in self.group_versions():
            doc = self.api_group(group)
            assert doc is not None
            groups.append({k: v for k, v in doc.items() if k not in ("kind", "apiVersion")})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, group: str, version: str) -> Obj | None:
        """`/apis/GROUP/VERSION` (or `/api/v1`): the `APIResourceList`, or None when not served."""
        infos = [k for k in self._by_gvp.values() if (k.group, k.version) == (group, version)]
        if not infos:
            return None
        resources: list[Obj] = []
        for k in sorted(infos, key=lambda i: i.plural):
            entry: Obj = {"name": k.plural, "singularName": k.singular or k.kind.lower(),
                          "namespaced": k.namespaced, "kind": k.kind, "verbs": list(_ALL_VERBS)}
            if k.short_names:
                entry["shortNames"] = list(k.short_names)
            if k.categories:
                entry["categories"] = list(k.categories)
            resources.append(entry)
            for sub in _subresources(k):
                sub_group, sub_version, sub_kind, verbs = _SUBRESOURCE_DISCOVERY[sub]
                item: Obj = {"name": f"{k.plural}/{sub}", "singularName": "", "namespaced": k.namespaced,
                             "kind": sub_kind or k.kind, "verbs": verbs}
                if sub_group:
                    item["group"], item["version"] = sub_group, sub_version
                resources.append(item)
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    def aggregated(self, *, legacy: bool) -> Obj:
        """The aggregated discovery document (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`)
        of `/api` (`legacy`) or `/apis`."""
        groups = {"": ["v1"]} if legacy else self.group_versions()
        items = []
        for group, versions in groups.items():
            version_docs = []
            for version in versions:
                infos = sorted((k for k in self._by_gvp.values() if (k.group, k.version) == (group, version)),
                               key=lambda i: i.plural)
                version_docs.append({"version": version, "freshness": "Current",
                                     "resources": [_aggregated_resource(k) for k in infos]})
            items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": version_docs})
        return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {"creationTimestamp": None}, "items": items}


def _subresources(info: KindInfo) -> list[str]:
    subs = (["status"] if info.has_status else []) + (["scale"] if info.has_scale else [])
    return subs + list(info.subresources)


def _aggregated_resource(k: KindInfo) -> Obj:
    entry: Obj = {"resource": k.plural, "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
                  "scope": "Namespaced" if k.namespaced else "Cluster",
                  "singularResource": k.singular or k.kind.lower(), "verbs": list(_ALL_VERBS)}
    if k.short_names:
        entry["shortNames"] = list(k.short_names)
    if k.categories:
        entry["categories"] = list(k.categories)
    subs = []
    for sub in _subresources(k):
        sub_group, sub_version, sub_kind, verbs = _SUBRESOURCE_DISCOVERY[sub]
        subs.append({"subresource": sub, "verbs": verbs, "responseKind": {
            "group": sub_group or k.group, "version": sub_version or k.version, "kind": sub_kind or k.kind}})
    if subs:
        entry["subresources"] = subs
    return entry


# -- CustomResourceDefinitions -----------------------------------------------------------------

def validate_crd(crd: Obj) -> list[FieldError]:
    """The checks the apiserver makes on a CRD that the fake depends on: names, scope, one
    storage version, a structural root schema on every version."""
    errors: list[FieldError] = []
    spec: Obj = crd["spec"] if isinstance(crd.get("spec"), dict) else {}
    names: Obj = spec["names"] if isinstance(spec.get("names"), dict) else {}
    group, plural = spec.get("group") or "", names.get("plural") or ""
    if not group:
        errors.append(FieldError("Required", "spec.group"))
    elif "." not in group:
        errors.append(FieldError("Invalid", "spec.group", "should be a domain with at least one dot", group))
    if not plural:
        errors.append(FieldError("Required", "spec.names.plural"))
    if not names.get("kind"):
        errors.append(FieldError("Required", "spec.names.kind"))
    if not names.get("listKind") and names.get("kind"):
        names["listKind"] = names["kind"] + "List"
    if not names.get("singular") and names.get("kind"):
        names["singular"] = str(names["kind"]).lower()
    if group and plural and crd["metadata"].get("name") != f"{plural}.{group}":
        errors.append(FieldError("Invalid", "metadata.name", "must be spec.names.plural+\".\"+spec.group",
                                 crd["metadata"].get("name")))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(FieldError("NotSupported", "spec.scope", '"Cluster", "Namespaced"', spec.get("scope")))
    versions = spec.get("versions") or []
    if not versions:
        errors.append(FieldError("Invalid", "spec.versions", "must have exactly one version marked as storage "
                                 "version", versions))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(FieldError("Invalid", "spec.versions", "must have exactly one version marked as storage "
                                 "version", versions))
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            errors.append(FieldError("Required", f"spec.versions[{i}].schema.openAPIV3Schema",
                                     "schemas are required"))
        elif schema.get("type") != "object":
            errors.append(FieldError("Invalid", f"spec.versions[{i}].schema.openAPIV3Schema.type",
                                     "must be object at the root", schema.get("type")))
    return errors


def crd_status(crd: Obj) -> Obj:
    """The status the apiextensions controllers give an accepted CRD: names accepted,
    established, the storage version recorded."""
    spec = crd["spec"]
    stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    previous = ((crd.get("status") or {}).get("storedVersions") or [])
    now = crd["metadata"].get("creationTimestamp")
    return {
        "acceptedNames": spec["names"],
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now}],
        "storedVersions": list(dict.fromkeys([*previous, *stored])),
    }


JOBSET_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {"group": "jobset.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet", "listKind": "JobSetList"},
             "versions": [{"name": "v1alpha2", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                               "metadata": {"type": "object"},
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                               "status": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}
"""A stand-in for the JobSet CRD (schema open: the real one's schema is not modelled)."""
