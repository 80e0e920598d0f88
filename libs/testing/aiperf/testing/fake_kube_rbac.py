"""Authentication and RBAC authorization for the fake API server (off unless `FakeKube(rbac=True)`).

Authentication: `Authorization: Bearer TOKEN`, where TOKEN was registered by the test
(`Authenticator.add_token`, `FakeKube.token_for`) or is the token of a ServiceAccount token
Secret in the store (type `kubernetes.io/service-account-token`, annotation
`kubernetes.io/service-account.name`, `data.token` filled in by the fake's token controller).
No token or an unknown one: 401. A ServiceAccount user is
`system:serviceaccount:NS:NAME` in groups `system:serviceaccounts`, `system:serviceaccounts:NS`
and `system:authenticated`; `system:masters` may do anything.

Authorization: the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings in the store, as
the RBAC authorizer evaluates them (verbs, apiGroups, resources with subresources such as
`pods/log` or `*/status`, resourceNames, `*`, nonResourceURLs); discovery paths are open to every
authenticated user (the default `system:discovery` binding). Refusals are 403 with the real
`Status` text. With RBAC on, the `OwnerReferencesPermissionEnforcement` admission plugin
(OpenShift enables it) runs on creates and updates (PUT; not on PATCH):
`check_owner_references`. Not modelled: aggregated ClusterRoles, the escalation checks on writing RBAC
objects, impersonation, the other default roles and bindings, TokenRequest tokens.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj
from aiperf.testing.fake_kube_store import Store

RBAC = "rbac.authorization.k8s.io"
SA_TOKEN_TYPE = "kubernetes.io/service-account-token"
_DISCOVERY_PATHS = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz")


@dataclass(frozen=True)
class User:
    """An authenticated identity."""

    name: str
    groups: tuple[str, ...] = ("system:authenticated",)

    @classmethod
    def service_account(cls, namespace: str, name: str) -> User:
        return cls(f"system:serviceaccount:{namespace}:{name}",
                   ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


ADMIN = User("fake-kube-admin", ("system:masters", "system:authenticated"))


@dataclass(frozen=True)
class Attributes:
    """What one request asks to do. `resource` None: a non-resource URL (`path`)."""

    verb: str
    path: str
    api_group: str = ""
    resource: str | None = None
    subresource: str = ""
    namespace: str = ""
    name: str = ""


class Authenticator:
    """Bearer tokens to users: registered ones, then ServiceAccount token Secrets in `store`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._tokens: dict[str, User] = {}

    def add_token(self, token: str, user: User) -> None:
        self._tokens[token] = user

    def authenticate(self, header: str | None) -> User:
        """The user behind an `Authorization` header; `ApiError` 401 when there is none."""
        if header and header.startswith("Bearer "):
            token = header.removeprefix("Bearer ").strip()
            if token in self._tokens:
                return self._tokens[token]
            encoded = base64.b64encode(token.encode()).decode()
            for (group, plural, ns, _), obj in self._store.raw_items():
                if (group, plural) != ("", "secrets") or obj.get("type") != SA_TOKEN_TYPE:
                    continue
                if (obj.get("data") or {}).get("token") == encoded:
                    sa = (obj["metadata"].get("annotations") or {}).get("kubernetes.io/service-account.name")
                    if sa and ("", "serviceaccounts", ns, sa) in dict(self._store.raw_items()):
                        return User.service_account(ns, sa)
        raise ApiError(401, "Unauthorized", "Unauthorized")


def verb_of(method: str, *, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP request."""
    if method in ("GET", "HEAD"):
        return "watch" if watch else "get" if named else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}.get(method, method.lower())


class Authorizer:
    """RBAC over the store's Role/ClusterRole/RoleBinding/ClusterRoleBinding objects."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def allows(self, user: User, attrs: Attributes) -> bool:
        if "system:masters" in user.groups:
            return True
        if attrs.resource is None and any(attrs.path == p or attrs.path.startswith(p + "/")
                                          for p in _DISCOVERY_PATHS):
            return True
        return any(_rule_allows(rule, attrs) for rule in self._rules_for(user, attrs.namespace))

    def check(self, user: User, attrs: Attributes, info: KindInfo | None) -> None:
        """`ApiError` 403 unless `user` may do `attrs`."""
        if self.allows(user, attrs):
            return
        if attrs.resource is None or info is None:
            raise ApiError(403, "Forbidden", f'forbidden: User "{user.name}" cannot {attrs.verb} path '
                           f'"{attrs.path}"')
        resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        why = (f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
               f"{scope}")
        raise ApiError.forbidden(info, attrs.name, why)

    def check_owner_references(self, user: User, attrs: Attributes, info: KindInfo, obj: Obj,
                               old: Obj | None) -> None:
        """The `OwnerReferencesPermissionEnforcement` admission plugin (on by default on
        OpenShift): 403 when `obj`, written by `user` as `attrs` says (create or update), adds an
        owner reference with `blockOwnerDeletion: true` whose owner's `finalizers` subresource the
        user may not `update`; an update that changes owner references at all also needs `delete`
        on the object itself."""
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        name = attrs.name or str((obj.get("metadata") or {}).get("name") or "")
        old_refs = ((old or {}).get("metadata") or {}).get("ownerReferences") or []
        if refs == old_refs:
            return
        if old is not None and not self.allows(user, Attributes(
                "delete", attrs.path, attrs.api_group, attrs.resource, "", attrs.namespace, attrs.name)):
            raise ApiError.forbidden(info, name, "cannot set an ownerRef on a resource you can't delete: , "
                                     "<nil>")
        old_blocking = {r.get("uid") for r in old_refs if isinstance(r, dict) and r.get("blockOwnerDeletion")}
        for ref in refs:
            if not isinstance(ref, dict) or not ref.get("blockOwnerDeletion") or ref.get("uid") in old_blocking:
                continue
            owner = self._store.kinds.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if owner is None:
                raise ApiError.forbidden(info, name, "cannot set blockOwnerDeletion in this case because "
                                         f"cannot find RESTMapping for APIVersion {ref.get('apiVersion')} Kind "
                                         f"{ref.get('kind')}: no matches for kind \"{ref.get('kind')}\"")
            need = Attributes("update", attrs.path, owner.group, owner.plural, "finalizers",
                              attrs.namespace if owner.namespaced else "", str(ref.get("name", "")))
            if not self.allows(user, need):
                raise ApiError.forbidden(info, name, "cannot set blockOwnerDeletion if an ownerReference "
                                         "refers to a resource you can't set finalizers on: , <nil>")

    def _rules_for(self, user: User, namespace: str) -> list[Obj]:
        items = dict(self._store.raw_items())
        rules: list[Obj] = []
        for (group, plural, ns, _), binding in items.items():
            if group != RBAC or plural not in ("clusterrolebindings", "rolebindings"):
                continue
            if plural == "rolebindings" and (not namespace or ns != namespace):
                continue
            if not any(_subject_matches(s, user, ns) for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                role = items.get((RBAC, "clusterroles", "", ref.get("name", "")))
            elif ref.get("kind") == "Role" and plural == "rolebindings":
                role = items.get((RBAC, "roles", ns, ref.get("name", "")))
            else:
                role = None
            rules.extend((role or {}).get("rules") or [])
        return rules


def _subject_matches(subject: Obj, user: User, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return user.name == f"system:serviceaccount:{subject.get('namespace') or binding_namespace}:{name}"
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    return False


def _rule_allows(rule: Obj, attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if attrs.resource is None:
        urls = rule.get("nonResourceURLs") or []
        return any(u == "*" or u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in urls)
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.api_group not in groups:
        return False
    combined = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    resources = rule.get("resources") or []
    if not any(r == "*" or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}")
               for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names
