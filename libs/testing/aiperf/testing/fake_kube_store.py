"""The object store behind the fake Kubernetes API server: reads, writes, deletion, watch history.

Everything here is synchronous and runs on the server's event loop, so each write is atomic with
respect to every other request. Objects are JSON dicts; the store hands out deep copies only.
Every write goes through admission (`fake_kube_admission`, and the CRD schema for custom
resources) unless it is a `system_*` write (what controllers and the kubelet do in a real
cluster). Deletion marks objects (deletionTimestamp, finalizers) and leaves the rest to the
garbage collector (`fake_kube_gc`), which `changed` wakes after every write.
"""

from __future__ import annotations

import base64
import copy
import itertools
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from aiperf.testing import fake_kube_admission as admission
from aiperf.testing.fake_kube_api import (
    JSON_PATCH,
    MERGE_PATCH,
    STALE,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    FieldError,
    KindInfo,
    Obj,
    WriteOptions,
)
from aiperf.testing.fake_kube_kinds import BUILTIN_KINDS, NAMESPACES, Kinds, crd_status, validate_crd
from aiperf.testing.fake_kube_patch import BadPatch, PatchError, json_patch, merge_patch
from aiperf.testing.fake_kube_schema import apply_schema, rule_compile_errors
from aiperf.testing.fake_kube_select import BOOKMARK, Selector, Watcher, WatchEvent
from aiperf.testing.fake_kube_smp import strategic_merge_patch

__all__ = ["BUILTIN_KINDS", "NAMESPACES", "ApiError", "KindInfo", "Obj", "Selector", "Store", "Watcher",
           "WatchEvent", "WriteOptions", "present"]

class Webhook(Protocol):
    """An admission webhook pair (mutating and validating) for the kinds it `applies` to: run on
    create (`old` None) and on updates of the main resource, never on status writes."""

    def applies(self, info: KindInfo) -> bool: ...

    def mutate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None: ...

    def validate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None: ...


Key = tuple[str, str, str, str]  # storage group, storage plural, namespace ("" when cluster-scoped), name

CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def now_rfc3339(offset_s: float = 0) -> str:
    """The current UTC time (plus `offset_s`) as the apiserver writes timestamps."""
    return (datetime.now(UTC) + timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _spec_part(obj: Obj) -> Obj:
    """Everything that bumps `metadata.generation` when it changes (not metadata, not status)."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def present(info: KindInfo, obj: Obj) -> Obj:
    """A stored object as `info`'s version shows it (a copy)."""
    obj = copy.deepcopy(obj)
    if info.group == "events.k8s.io":
        return admission.event_from_core(obj)
    if not info.builtin:
        obj["apiVersion"] = info.api_version
    return obj


def to_storage(info: KindInfo, obj: Obj) -> Obj:
    """A body written through `info`'s version as the store keeps it."""
    if info.group == "events.k8s.io":
        return admission.event_to_core(obj)
    return obj


class Store:
    """Objects keyed by (group, plural, namespace, name), the served kinds, a global
    resourceVersion counter, a bounded event history that watches replay from, the live watchers.

    `history_limit`: events kept; a watch from a resourceVersion older than the oldest kept
    one gets 410 Expired (as after an etcd compaction), and so does `compact()`.
    `changed`: called after every committed change (the garbage collector's wake-up).
    """

    def __init__(self, *, clock: Callable[[float], str] = now_rfc3339, history_limit: int = 10_000) -> None:
        self.kinds = Kinds()
        self._objects: dict[Key, Obj] = {}
        self._rv = itertools.count(1000)
        self.current_rv = next(self._rv)
        self.history: deque[WatchEvent] = deque()
        self.history_limit = history_limit
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        self.changed: Callable[[], None] = lambda: None
        self._clock = clock
        self._ips = itertools.count(2)
        self.webhooks: list[Webhook] = []

    # -- reads ---------------------------------------------------------------------------------

    def key(self, info: KindInfo, namespace: str, name: str) -> Key:
        group, plural = info.storage
        return (group, plural, namespace if info.namespaced else "", name)

    def get(self, info: KindInfo, namespace: str, name: str) -> Obj:
        """The stored object, or `ApiError` 404."""
        obj = self._objects.get(self.key(info, namespace, name))
        if obj is None:
            raise ApiError.not_found(info, name)
        return copy.deepcopy(obj)

    def find(self, info: KindInfo, namespace: str, name: str) -> Obj | None:
        """The stored object, or None."""
        obj = self._objects.get(self.key(info, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list_objects(self, info: KindInfo, namespace: str | None, selector: Selector) -> list[Obj]:
        """Matching objects sorted by namespace and name; `namespace` None means all of them."""
        group, plural = info.storage
        found = [obj for (g, p, ns, _), obj in sorted(self._objects.items())
                 if (g, p) == (group, plural) and (namespace is None or ns == namespace) and selector.matches(obj)]
        return copy.deepcopy(found)

    def namespace_exists(self, namespace: str) -> bool:
        return ("", "namespaces", "", namespace) in self._objects

    def all_objects(self) -> Iterable[tuple[Key, Obj]]:
        """Every stored (key, object), for tests and the garbage collector."""
        return [(k, copy.deepcopy(v)) for k, v in sorted(self._objects.items())]

    def raw_items(self) -> list[tuple[Key, Obj]]:
        """The stored (key, object) pairs without copies (read only: for the garbage collector)."""
        return list(self._objects.items())

    def info_of(self, key: Key) -> KindInfo:
        """The served type a stored key belongs to (its storage version)."""
        info = self.kinds.storage_info(key[0], key[1])
        if info is None:  # a custom resource whose CRD is gone: still addressable for cleanup
            return KindInfo(key[0], "v1", key[1], key[1], namespaced=bool(key[2]), builtin=False)
        return info

    def allocate_ip(self, prefix: str) -> str:
        """A fresh address `prefix.X.Y` (cluster IPs, pod IPs)."""
        n = next(self._ips)
        return f"{prefix}.{n // 250}.{n % 250 + 2}"

    # -- writes --------------------------------------------------------------------------------

    def create(self, info: KindInfo, namespace: str, body: Obj, options: WriteOptions | None = None) -> Obj:
        """POST: admission, then uid, resourceVersion, creationTimestamp, generation; 409 on a
        duplicate (also while the old object is still being deleted), 404 when the namespace
        does not exist, 403 while it terminates, 422 when admission refuses."""
        options = options or WriteOptions()
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        admission.check_type_meta(info, obj, meta.get("name", "") if isinstance(meta, dict) else "")
        admission.check_meta_types(meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", f"{info.kind}.{info.api_version} is invalid: "
                           "metadata.name: Required value: name or generateName is required", info=info,
                           causes=[FieldError("Required", "metadata.name",
                                              "name or generateName is required").cause()])
        if info.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError.bad_request("the namespace of the provided object does not match the "
                                           "namespace sent on the request")
            meta["namespace"] = namespace
            ns_obj = self._objects.get(("", "namespaces", "", namespace))
            if ns_obj is None:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found', info=NAMESPACES,
                               name=namespace)
            if ns_obj["metadata"].get("deletionTimestamp"):
                why = (f"unable to create new content in namespace {namespace} because it is being "
                       "terminated")
                raise ApiError(403, "Forbidden", f'{info.resource} "{name}" is forbidden: {why}', info=info,
                               name=name, causes=[{"reason": "NamespaceTerminating", "message": why,
                                                   "field": "metadata.namespace"}])
        else:
            meta.pop("namespace", None)
        self._refuse_if_crd_terminating(info)
        key = self.key(info, namespace, name)
        existing = self._objects.get(key)
        if existing is not None:
            prefix = "object is being deleted: " if existing["metadata"].get("deletionTimestamp") else ""
            raise ApiError(409, "AlreadyExists", f'{prefix}{info.resource} "{name}" already exists',
                           info=info, name=name)
        obj["apiVersion"] = obj.get("apiVersion") or info.api_version
        obj["kind"] = obj.get("kind") or info.kind
        for server_owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "uid",
                             "creationTimestamp", "selfLink", "managedFields"):
            meta.pop(server_owned, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self._clock(0)
        meta["generation"] = 1
        if info.has_status:
            obj.pop("status", None)
        errors = admission.name_errors(info, name)
        if info.builtin:
            admission.default_builtin(info, obj, cluster_ip=self.allocate_ip("10.96"))
        obj = self._admit(info, obj, None, options, errors, hooks=True)
        if info.plural == "customresourcedefinitions" and info.group == "apiextensions.k8s.io":
            obj["status"] = crd_status(obj)
            obj["metadata"]["finalizers"] = [*obj["metadata"].get("finalizers", []), CRD_FINALIZER]
        stored = to_storage(info, obj)
        if info.plural == "serviceaccounts" or (info.kind == "Secret" and obj.get("type") ==
                                                "kubernetes.io/service-account-token"):
            self._populate_token(stored)
        if options.dry_run:
            stored["metadata"]["resourceVersion"] = str(self.current_rv)
            return stored
        return self._commit(key, stored, "ADDED")

    def replace(self, info: KindInfo, namespace: str, name: str, body: Obj, *, status: bool,
                options: WriteOptions | None = None) -> Obj:
        """PUT of the object (`status` False: its status is kept) or of its status subresource
        (`status` True: only its status changes). 409 on a stale resourceVersion."""
        old = self.get(info, namespace, name)
        meta = body.get("metadata") or {}
        admission.check_type_meta(info, body, name)
        if meta.get("name") not in (None, name):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                                       f"name on the URL ({name})")
        rv = meta.get("resourceVersion")
        if rv is None and not info.builtin:
            raise ApiError.invalid(info, name, "metadata.resourceVersion: Invalid value: 0x0: must be "
                                   "specified for an update")
        if rv is not None and rv != old["metadata"]["resourceVersion"]:
            raise ApiError.conflict(info, name, STALE)
        return self._update(info, namespace, old, to_storage(info, copy.deepcopy(body)), status=status,
                            options=options or WriteOptions())

    def patch(self, info: KindInfo, namespace: str, name: str, content_type: str, patch: Any, *,
              status: bool, options: WriteOptions | None = None) -> Obj:
        """PATCH: JSON Patch (422 when an op, e.g. `test`, fails), merge patch, or strategic merge
        patch (built-in kinds only: 415 on custom resources, like the real server)."""
        stored = self.get(info, namespace, name)
        old = present(info, stored)
        accepted = f"{JSON_PATCH}, {MERGE_PATCH}, application/apply-patch+yaml"
        try:
            if content_type == JSON_PATCH:
                new = json_patch(old, patch)
            elif content_type == MERGE_PATCH:
                if not isinstance(patch, dict):
                    raise ApiError.bad_request("a merge patch must be a JSON object")
                new = merge_patch(old, patch)
            elif content_type == STRATEGIC_MERGE_PATCH and info.builtin:
                new = strategic_merge_patch(info, old, patch)
            elif content_type == STRATEGIC_MERGE_PATCH:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                               f"format - accepted media types include: {accepted}")
            else:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                               f"format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, "
                               f"application/apply-patch+yaml, {STRATEGIC_MERGE_PATCH}")
        except BadPatch as exc:
            raise ApiError.bad_request(str(exc)) from None
        except PatchError as exc:
            raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                           info=info, name=name,
                           causes=[{"reason": "UnexpectedServerResponse", "message": str(exc)}]) from None
        if not isinstance(new, dict):
            raise ApiError.bad_request("the patched document is not an object")
        new_meta = new.get("metadata") or {}
        if new_meta.get("resourceVersion") not in (None, "", stored["metadata"]["resourceVersion"]):
            raise ApiError.conflict(info, name, STALE)
        return self._update(info, namespace, stored, to_storage(info, new), status=status,
                            options=options or WriteOptions())

    def delete(self, info: KindInfo, namespace: str, name: str, delete_options: Obj,
               options: WriteOptions | None = None) -> tuple[Obj, bool]:
        """DELETE with `preconditions` (409 on mismatch), `propagationPolicy` and
        `gracePeriodSeconds`. Returns the object and whether it is gone now.

        What stays: an object with finalizers (deletionTimestamp set); Foreground and Orphan
        add the `foregroundDeletion`/`orphan` finalizer that the garbage collector clears; a
        scheduled, unfinished Pod stays for its grace period (until the kubelet confirms, see
        `finish_pod`); a Namespace stays Terminating until it is empty. Background removes the
        object now and leaves its dependents to the garbage collector.
        """
        options = options or WriteOptions()
        old = self.get(info, namespace, name)
        meta = old["metadata"]
        pre = delete_options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise ApiError.conflict(info, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                    f"UID in object meta: {meta['uid']}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise ApiError.conflict(info, name, "Precondition failed: ResourceVersion in precondition: "
                                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                    f"{meta['resourceVersion']}")
        policy = _policy(info, delete_options)
        if policy not in ("Foreground", "Background", "Orphan"):
            raise ApiError.invalid(info, name, f'propagationPolicy: Unsupported value: "{policy}": supported '
                                   'values: "Foreground", "Background", "Orphan"')
        key = self.key(info, namespace, name)
        finalizers = list(meta.get("finalizers") or [])
        extra = {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(policy)
        if extra and extra not in finalizers:
            finalizers.append(extra)
        grace = delete_options.get("gracePeriodSeconds")
        if info.group == "" and info.plural == "pods":
            spec, phase = old.get("spec") or {}, (old.get("status") or {}).get("phase")
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
                grace = 0  # never started or already finished: nothing for a kubelet to stop
            if meta.get("deletionTimestamp") and grace == 0 and meta.get("deletionGracePeriodSeconds"):
                if not finalizers:
                    return self._finish(key, old, options)  # a force delete of a terminating pod
                meta["deletionGracePeriodSeconds"] = 0
                meta["finalizers"] = finalizers
                return (old, False) if options.dry_run else (self._commit(key, old, "MODIFIED"), False)
        if info.group == "" and info.plural == "namespaces":
            if not meta.get("deletionTimestamp"):
                old["status"] = {**(old.get("status") or {}), "phase": "Terminating"}
            grace = 0
            finalizers = list(meta.get("finalizers") or [])  # namespaces always cascade, via spec.finalizers
        if meta.get("deletionTimestamp"):
            if finalizers != list(meta.get("finalizers") or []):
                meta["finalizers"] = finalizers
                return (old, False) if options.dry_run else (self._commit(key, old, "MODIFIED"), False)
            return old, False
        waits = bool(finalizers) or bool(grace) or info.plural == "namespaces"
        if not waits:
            return self._finish(key, old, options)
        meta["deletionTimestamp"] = self._clock(float(grace or 0))
        meta["deletionGracePeriodSeconds"] = int(grace or 0)
        meta["generation"] = meta.get("generation", 0) + 1
        if finalizers:
            meta["finalizers"] = finalizers
        if options.dry_run:
            return old, False
        return self._commit(key, old, "MODIFIED"), False

    def compact(self) -> None:
        """Forget the event history: a watch from any older resourceVersion now gets 410."""
        self.compacted_rv = self.current_rv
        self.history.clear()

    def bookmark(self) -> None:
        """Send a BOOKMARK (the current resourceVersion) to every watch that allowed them."""
        for watcher in self.watchers:
            if watcher.bookmarks:
                watcher.queue.put_nowait((BOOKMARK, {"metadata": {"resourceVersion": str(self.current_rv)}}))

    def events_since(self, watcher: Watcher, rv: int) -> list[tuple[str, Obj]]:
        """What `watcher` sends for the history after `rv`; `ApiError` 410 when `rv` is older
        than the history kept."""
        if rv < self.compacted_rv:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.compacted_rv + 1})")
        sent = [watcher.translate(e) for e in self.history if e.rv > rv]
        return [s for s in sent if s is not None]

    # -- system writes (controllers, scheduler, kubelet) ---------------------------------------

    def system_update(self, info: KindInfo, obj: Obj) -> Obj:
        """Store `obj` (an existing object, changed) without admission, as a controller's write
        would; removes it when it is being deleted and has no finalizers left. Empty metadata
        lists and maps are dropped, as any write through the apiserver's serializer."""
        meta = obj["metadata"]
        key = self.key(info, meta.get("namespace", ""), meta["name"])
        old = self._objects.get(key)
        if old is None:
            raise ApiError.not_found(info, meta["name"])
        obj = copy.deepcopy(obj)
        admission.drop_empty_meta(obj)
        obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if obj == old:
            return copy.deepcopy(old)
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers") \
                and not obj["metadata"].get("deletionGracePeriodSeconds") and key[1] != "namespaces":
            self._objects[key] = obj
            return self._remove(key)
        return self._commit(key, obj, "MODIFIED")

    def system_remove(self, key: Key) -> Obj:
        """Remove a stored object now (the kubelet confirming a pod's end, a finished deletion)."""
        return self._remove(key)

    # -- internals -----------------------------------------------------------------------------

    def _finish(self, key: Key, obj: Obj, options: WriteOptions) -> tuple[Obj, bool]:
        if options.dry_run:
            return obj, True
        return self._remove(key), True

    def _refuse_if_crd_terminating(self, info: KindInfo) -> None:
        if info.crd:
            crd = self._objects.get(("apiextensions.k8s.io", "customresourcedefinitions", "", info.crd))
            if crd is not None and crd["metadata"].get("deletionTimestamp"):
                raise ApiError(405, "MethodNotAllowed",
                               "create not allowed while custom resource definition is terminating")

    def _admit(self, info: KindInfo, obj: Obj, old: Obj | None, options: WriteOptions,
               errors: list[FieldError], *, hooks: bool = False) -> Obj:
        """Validate (and for custom resources prune and default) `obj`; raise 422/400. With
        `hooks`, the `webhooks` that apply mutate it first and validate it last."""
        name = obj["metadata"].get("name", "")
        admission.check_meta_types(obj["metadata"])
        webhooks = [w for w in self.webhooks if w.applies(info)] if hooks else []
        for webhook in webhooks:
            webhook.mutate(info, obj, old)
        if info.schema is not None:
            pruned, schema_errors = apply_schema(info.schema, obj, old)
            if pruned and options.field_validation == "Strict":
                raise ApiError.bad_request("strict decoding error: " + ", ".join(
                    f'unknown field "{p}"' for p in pruned))
            if options.field_validation != "Ignore":
                options.warnings.extend(f'unknown field "{p}"' for p in pruned)
            errors = errors + schema_errors
        if info.builtin:
            errors = errors + admission.builtin_errors(info, obj)
            if old is not None:
                errors = errors + admission.update_errors(info, old, obj)
        if info.plural == "customresourcedefinitions" and info.group == "apiextensions.k8s.io":
            errors = errors + validate_crd(obj)
            for i, version in enumerate((obj.get("spec") or {}).get("versions") or []):
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                errors += rule_compile_errors(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
        errors = errors + admission.meta_errors(info, obj["metadata"])
        if errors:
            raise ApiError.invalid_fields(info, name, errors)
        for webhook in webhooks:
            webhook.validate(info, obj, old)
        admission.drop_empty_meta(obj)
        return obj

    def _populate_token(self, obj: Obj) -> None:
        if obj.get("kind") == "Secret":
            obj.setdefault("data", {})["token"] = base64.b64encode(uuid.uuid4().hex.encode()).decode()

    def _update(self, info: KindInfo, namespace: str, old: Obj, new: Obj, *, status: bool,
                options: WriteOptions) -> Obj:
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
            admission.check_meta_types(new_meta)
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
        new = to_storage(info, self._admit(info, present(info, new), present(info, old), options, [],
                                           hooks=not status))
        new["apiVersion"] = old["apiVersion"]
        key = self.key(info, namespace, name)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no event (like the real server)
        if info.group == "apiextensions.k8s.io" and info.plural == "customresourcedefinitions":
            new["status"] = crd_status(new) if not status else new.get("status")
        if options.dry_run:
            return new
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not (
                info.plural == "pods" and meta.get("deletionGracePeriodSeconds")) and info.plural != "namespaces":
            self._objects[key] = new
            return self._remove(key)
        return self._commit(key, new, "MODIFIED")

    def _commit(self, key: Key, obj: Obj, event_type: str) -> Obj:
        old = self._objects.get(key)
        self.current_rv = next(self._rv)
        obj["metadata"]["resourceVersion"] = str(self.current_rv)
        self._objects[key] = obj
        if key[:2] == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.kinds.sync_crd(obj)
        self._emit(key, event_type, obj, old)
        return copy.deepcopy(obj)

    def _remove(self, key: Key) -> Obj:
        obj = self._objects.pop(key)
        self.current_rv = next(self._rv)
        obj["metadata"]["resourceVersion"] = str(self.current_rv)
        if key[:2] == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.kinds.drop_crd(key[3])
        self._emit(key, "DELETED", obj, obj)
        return copy.deepcopy(obj)

    def _emit(self, key: Key, event_type: str, obj: Obj, old: Obj | None) -> None:
        event = WatchEvent(self.current_rv, event_type, key[0], key[1], key[2], copy.deepcopy(obj),
                           copy.deepcopy(old) if old is not None else None)
        self.history.append(event)
        while len(self.history) > self.history_limit:
            self.compacted_rv = self.history.popleft().rv
        for watcher in self.watchers:
            watcher.offer(event)
        self.changed()


def _policy(info: KindInfo, options: Obj) -> str:
    policy = options.get("propagationPolicy")
    if policy:
        return str(policy)
    orphan = options.get("orphanDependents")
    if orphan is not None:
        return "Orphan" if orphan else "Background"
    return "Orphan" if (info.group, info.plural) == ("batch", "jobs") else "Background"

