"""The object store behind the fake Kubernetes API server: kinds, errors, selectors, writes, watch.

Everything here is synchronous and runs on the server's event loop, so each write is atomic with
respect to every other request. Objects are JSON dicts; the store hands out deep copies only.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiperf.testing.fake_kube_patch import BadPatch, PatchError, json_patch, merge_patch

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class KindInfo:
    """One resource type: where it is served and how the server treats it.

    `has_status`: writes to the main resource ignore `status`, and `.../status` exists.
    `builtin`: a compiled-in type (strategic merge patch allowed, PUT without a resourceVersion
    allowed, an immediate DELETE answers with a `Status`); custom resources are the opposite.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    has_status: bool = False
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """The name used in error messages: `pods`, `jobsets.jobset.x-k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTIN_KINDS: tuple[KindInfo, ...] = (
    KindInfo("", "v1", "namespaces", "Namespace", namespaced=False, has_status=True),
    KindInfo("", "v1", "pods", "Pod", has_status=True),
    KindInfo("", "v1", "services", "Service", has_status=True),
    KindInfo("", "v1", "configmaps", "ConfigMap"),
    KindInfo("", "v1", "secrets", "Secret"),
    KindInfo("", "v1", "events", "Event"),
    KindInfo("", "v1", "serviceaccounts", "ServiceAccount"),
    KindInfo("batch", "v1", "jobs", "Job", has_status=True),
    KindInfo("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    KindInfo("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    KindInfo("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    KindInfo("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
             namespaced=False),
    KindInfo("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
             namespaced=False, has_status=True),
    KindInfo("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", has_status=True, builtin=False),
)

NAMESPACES = BUILTIN_KINDS[0]


class ApiError(Exception):
    """An error answer: rendered as a `Status` object with HTTP status `code`."""

    def __init__(self, code: int, reason: str, message: str, *, info: KindInfo | None = None,
                 name: str = "", causes: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details: dict[str, Any] = {}
        if name:
            self.details["name"] = name
        if info is not None:
            if info.group:
                self.details["group"] = info.group
            self.details["kind"] = info.plural
        if causes:
            self.details["causes"] = causes

    def status(self) -> Obj:
        """The `Status` body the real server sends."""
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body

    @classmethod
    def not_found(cls, info: KindInfo, name: str) -> ApiError:
        return cls(404, "NotFound", f'{info.resource} "{name}" not found', info=info, name=name)

    @classmethod
    def conflict(cls, info: KindInfo, name: str, why: str) -> ApiError:
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {info.resource} "{name}": {why}',
                   info=info, name=name)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def invalid(cls, info: KindInfo, name: str, message: str) -> ApiError:
        return cls(422, "Invalid", f'{info.kind} "{name}" is invalid: {message}', info=info, name=name)

    @classmethod
    def no_route(cls) -> ApiError:
        return cls(404, "NotFound", "the server could not find the requested resource")


STALE = "the object has been modified; please apply your changes to the latest version and try again"


# -- selectors ---------------------------------------------------------------------------------

Requirement = Callable[[dict[str, str]], bool]
_SET_TERM = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _label_requirement(key: str, op: str, values: frozenset[str] = frozenset()) -> Requirement:
    """Label `key` is in/not in `values` (`in`, `notin`; `=`/`!=` use one value), or it exists /
    does not (`exists`, `!exists`)."""

    def check(labels: dict[str, str]) -> bool:
        match op:
            case "in":
                return labels.get(key) in values
            case "notin":
                return labels.get(key) not in values
            case "exists":
                return key in labels
            case _:
                return key not in labels

    return check


def _field_requirement(attr: str, value: str, negate: bool) -> Callable[[Obj], bool]:
    def check(obj: Obj) -> bool:
        return (obj["metadata"].get(attr, "") == value) != negate

    return check


def parse_label_selector(selector: str) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`; raises `ApiError` 400 on bad syntax."""
    terms: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    requirements: list[Requirement] = []
    for term in (t for t in terms if t.strip()):
        if m := _SET_TERM.match(term):
            values = frozenset(v.strip() for v in m.group(3).split(","))
            requirements.append(_label_requirement(m.group(1), m.group(2), values))
        elif m := _EQ_TERM.match(term):
            key, op, value = m.groups()
            requirements.append(_label_requirement(key, "notin" if op == "!=" else "in", frozenset({value})))
        elif m := _EXISTS_TERM.match(term):
            requirements.append(_label_requirement(m.group(2), "!exists" if m.group(1) == "!" else "exists"))
        else:
            raise ApiError.bad_request(f"unable to parse requirement: {term.strip()!r}")
    return requirements


def parse_field_selector(selector: str) -> list[Callable[[Obj], bool]]:
    """Parse `metadata.name=x,metadata.namespace!=y` (the fields every kind supports)."""
    requirements: list[Callable[[Obj], bool]] = []
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        m = _EQ_TERM.match(term)
        if m is None:
            raise ApiError.bad_request(f"invalid field selector: {term!r}")
        key, op, value = m.groups()
        if key not in ("metadata.name", "metadata.namespace"):
            raise ApiError.bad_request(f'field label not supported: {key}')
        requirements.append(_field_requirement(key.split(".", 1)[1], value, op == "!="))
    return requirements


@dataclass
class Selector:
    """Label and field selectors of one list or watch."""

    labels: list[Requirement] = field(default_factory=list)
    fields: list[Callable[[Obj], bool]] = field(default_factory=list)

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None) -> Selector:
        return cls(parse_label_selector(label_selector or ""), parse_field_selector(field_selector or ""))

    def matches(self, obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in self.labels) and all(r(obj) for r in self.fields)


# -- watch -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WatchEvent:
    """One committed change: `type` is ADDED, MODIFIED or DELETED; `obj` is the object after it."""

    rv: int
    type: str
    group: str
    plural: str
    namespace: str
    obj: Obj


@dataclass(eq=False)
class Watcher:
    """A live watch: matching events land in `queue`; `None` there means the server stops."""

    group: str
    plural: str
    namespace: str | None
    selector: Selector
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=asyncio.Queue)

    def wants(self, event: WatchEvent) -> bool:
        return (event.group == self.group and event.plural == self.plural
                and (self.namespace is None or event.namespace == self.namespace)
                and self.selector.matches(event.obj))


# -- the store ---------------------------------------------------------------------------------

Key = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec_part(obj: Obj) -> Obj:
    """Everything that bumps `metadata.generation` when it changes (not metadata, not status)."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Store:
    """Objects keyed by (group, plural, namespace, name), a global resourceVersion counter,
    the event history watches replay from, and the live watchers.

    `compacted_rv`: a watch that starts at or before it gets `410 Expired` (see `compact`).
    """

    def __init__(self, *, clock: Callable[[], str] = _now_rfc3339) -> None:
        self._objects: dict[Key, Obj] = {}
        self._rv = itertools.count(1000)
        self.current_rv = next(self._rv)
        self.history: list[WatchEvent] = []
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        self._clock = clock

    # -- reads ---------------------------------------------------------------------------------

    def get(self, info: KindInfo, namespace: str, name: str) -> Obj:
        """The stored object, or `ApiError` 404."""
        obj = self._objects.get((info.group, info.plural, namespace, name))
        if obj is None:
            raise ApiError.not_found(info, name)
        return copy.deepcopy(obj)

    def find(self, info: KindInfo, namespace: str, name: str) -> Obj | None:
        """The stored object, or None."""
        obj = self._objects.get((info.group, info.plural, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list_objects(self, info: KindInfo, namespace: str | None, selector: Selector) -> list[Obj]:
        """Matching objects sorted by namespace and name; `namespace` None means all of them."""
        found = [obj for (group, plural, ns, _), obj in sorted(self._objects.items())
                 if group == info.group and plural == info.plural
                 and (namespace is None or ns == namespace) and selector.matches(obj)]
        return copy.deepcopy(found)

    def namespace_exists(self, namespace: str) -> bool:
        return (NAMESPACES.group, NAMESPACES.plural, "", namespace) in self._objects

    # -- writes --------------------------------------------------------------------------------

    def create(self, info: KindInfo, namespace: str, body: Obj) -> Obj:
        """POST: assign uid, resourceVersion, creationTimestamp, generation; 409 on a duplicate,
        404 when the namespace does not exist, 422 without a name."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", f"{info.kind}.{info.api_version} is invalid: "
                           "metadata.name: Required value: name or generateName is required",
                           info=info)
        if info.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError.bad_request("the namespace of the provided object does not match the "
                                           "namespace sent on the request")
            meta["namespace"] = namespace
            if not self.namespace_exists(namespace):
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                               info=NAMESPACES, name=namespace)
        else:
            meta.pop("namespace", None)
        key = (info.group, info.plural, namespace if info.namespaced else "", name)
        if key in self._objects:
            raise ApiError(409, "AlreadyExists", f'{info.resource} "{name}" already exists',
                           info=info, name=name)
        obj["apiVersion"] = obj.get("apiVersion") or info.api_version
        obj["kind"] = obj.get("kind") or info.kind
        for server_owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_owned, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self._clock()
        meta["generation"] = 1
        if info.has_status:
            obj.pop("status", None)
        self._initialize(info, obj)
        return self._commit(key, obj, "ADDED")

    def replace(self, info: KindInfo, namespace: str, name: str, body: Obj, *, status: bool) -> Obj:
        """PUT of the object (`status` False: its status is kept) or of its status subresource
        (`status` True: only its status changes). 409 on a stale resourceVersion."""
        old = self.get(info, namespace, name)
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                                       f"name on the URL ({name})")
        rv = meta.get("resourceVersion")
        if rv is None and not info.builtin:
            raise ApiError.invalid(info, name, "metadata.resourceVersion: Invalid value: 0x0: must be "
                                   "specified for an update")
        if rv is not None and rv != old["metadata"]["resourceVersion"]:
            raise ApiError.conflict(info, name, STALE)
        return self._update(info, namespace, old, copy.deepcopy(body), status=status)

    def patch(self, info: KindInfo, namespace: str, name: str, content_type: str, patch: Any, *,
              status: bool) -> Obj:
        """PATCH: JSON Patch (422 when an op, e.g. `test`, fails), merge patch, or strategic merge
        patch (as a merge patch; 415 on custom resources like the real server)."""
        old = self.get(info, namespace, name)
        try:
            if content_type == JSON_PATCH:
                new = json_patch(old, patch)
            elif content_type == MERGE_PATCH or (content_type == STRATEGIC_MERGE_PATCH and info.builtin):
                if not isinstance(patch, dict):
                    raise ApiError.bad_request("a merge patch must be a JSON object")
                new = merge_patch(old, patch)
            elif content_type == STRATEGIC_MERGE_PATCH:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                               f"format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, "
                               "application/apply-patch+yaml")
            else:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                               f"format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, "
                               f"{STRATEGIC_MERGE_PATCH}, application/apply-patch+yaml")
        except BadPatch as exc:
            raise ApiError.bad_request(str(exc)) from None
        except PatchError as exc:
            raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                           info=info, name=name,
                           causes=[{"reason": "UnexpectedServerResponse", "message": str(exc)}]) from None
        if not isinstance(new, dict):
            raise ApiError.bad_request("the patched document is not an object")
        new_meta = new.get("metadata") or {}
        if new_meta.get("resourceVersion") not in (None, "", old["metadata"]["resourceVersion"]):
            raise ApiError.conflict(info, name, STALE)
        return self._update(info, namespace, old, new, status=status)

    def delete(self, info: KindInfo, namespace: str, name: str, options: Obj) -> tuple[Obj, bool]:
        """DELETE with `preconditions` (409 on mismatch) and `propagationPolicy`.

        An object with finalizers gets `deletionTimestamp` and stays until they are removed
        (returns it and False); otherwise it is removed now, with its dependents (objects whose
        ownerReferences name its uid) unless the policy is Orphan (returns it and True).
        """
        old = self.get(info, namespace, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise ApiError.conflict(info, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                    f"UID in object meta: {old['metadata']['uid']}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise ApiError.conflict(info, name, "Precondition failed: ResourceVersion in precondition: "
                                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                    f"{old['metadata']['resourceVersion']}")
        orphan = options.get("propagationPolicy") == "Orphan" or options.get("orphanDependents") is True
        key = self._key(info, namespace, name)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old, False
            old["metadata"]["deletionTimestamp"] = self._clock()
            old["metadata"]["deletionGracePeriodSeconds"] = 0
            old["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
            return self._commit(key, old, "MODIFIED"), False
        return self._remove(key, cascade=not orphan), True

    def compact(self) -> None:
        """Forget the event history: a watch from any older resourceVersion now gets 410."""
        self.compacted_rv = self.current_rv
        self.history.clear()

    # -- internals -----------------------------------------------------------------------------

    def _key(self, info: KindInfo, namespace: str, name: str) -> Key:
        return (info.group, info.plural, namespace if info.namespaced else "", name)

    def _initialize(self, info: KindInfo, obj: Obj) -> None:
        """Server-side defaults of a few built-in kinds."""
        if info.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
        elif info.kind == "Pod":
            obj["status"] = {"phase": "Pending"}
        elif info.kind == "Secret" and isinstance(obj.get("stringData"), dict):
            data = obj.setdefault("data", {})
            for k, v in obj.pop("stringData").items():
                data[k] = base64.b64encode(str(v).encode()).decode()

    def _update(self, info: KindInfo, namespace: str, old: Obj, new: Obj, *, status: bool) -> Obj:
        name = old["metadata"]["name"]
        if status:
            if not info.has_status:
                raise ApiError.no_route()
            candidate = copy.deepcopy(old)
            if "status" in new:
                candidate["status"] = new["status"]
            else:
                candidate.pop("status", None)
            new = candidate
        else:
            if info.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            new_meta = new.setdefault("metadata", {})
            if new_meta.get("uid") not in (None, "", old["metadata"]["uid"]):
                raise ApiError.conflict(info, name, f"Precondition failed: UID in precondition: "
                                        f"{new_meta['uid']}, UID in object meta: {old['metadata']['uid']}")
            for kept in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                         "deletionGracePeriodSeconds", "generation"):
                if kept in old["metadata"]:
                    new_meta[kept] = old["metadata"][kept]
                else:
                    new_meta.pop(kept, None)
            new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if old["metadata"].get("deletionTimestamp"):
                added = set(new_meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
                if added:
                    raise ApiError.invalid(info, name, "metadata.finalizers: Forbidden: no new finalizers "
                                           "can be added if the object is being deleted")
            if _spec_part(new) != _spec_part(old):
                new_meta["generation"] = old["metadata"].get("generation", 0) + 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        key = self._key(info, namespace, name)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no event (like the real server)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            self._objects[key] = new
            return self._remove(key, cascade=True)
        return self._commit(key, new, "MODIFIED")

    def _commit(self, key: Key, obj: Obj, event_type: str) -> Obj:
        self.current_rv = next(self._rv)
        obj["metadata"]["resourceVersion"] = str(self.current_rv)
        self._objects[key] = obj
        self._emit(key, event_type, obj)
        return copy.deepcopy(obj)

    def _remove(self, key: Key, *, cascade: bool) -> Obj:
        obj = self._objects.pop(key)
        self.current_rv = next(self._rv)
        obj["metadata"]["resourceVersion"] = str(self.current_rv)
        self._emit(key, "DELETED", obj)
        if cascade:
            self._delete_dependents(obj, key)
        return copy.deepcopy(obj)

    def _delete_dependents(self, owner: Obj, owner_key: Key) -> None:
        """The garbage collector, run at once: dependents by ownerReference uid and, for a
        namespace, everything in it."""
        uid = owner["metadata"]["uid"]
        is_namespace = owner_key[:2] == (NAMESPACES.group, NAMESPACES.plural)
        for key, obj in list(self._objects.items()):
            if key not in self._objects:
                continue
            owned = any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
            if owned or (is_namespace and key[2] == owner_key[3]):
                if obj["metadata"].get("finalizers"):
                    if not obj["metadata"].get("deletionTimestamp"):
                        obj["metadata"]["deletionTimestamp"] = self._clock()
                        self._commit(key, obj, "MODIFIED")
                else:
                    self._remove(key, cascade=True)

    def _emit(self, key: Key, event_type: str, obj: Obj) -> None:
        event = WatchEvent(self.current_rv, event_type, key[0], key[1], key[2], copy.deepcopy(obj))
        self.history.append(event)
        for watcher in self.watchers:
            if watcher.wants(event):
                watcher.queue.put_nowait(event)

    def events_since(self, watcher: Watcher, rv: int) -> list[WatchEvent]:
        """History events after `rv` that `watcher` wants; `ApiError` 410 when `rv` is compacted."""
        if rv < self.compacted_rv:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.compacted_rv})")
        return [e for e in self.history if e.rv > rv and watcher.wants(e)]

    def all_objects(self) -> Iterable[tuple[Key, Obj]]:
        """Every stored (key, object), for tests that inspect the whole store."""
        return [(k, copy.deepcopy(v)) for k, v in sorted(self._objects.items())]
