"""The controllers that finish deletions in a real cluster, for the fake API server: the garbage
collector, the namespace controller, the CRD cleanup controller, and the kubelet's part of a
pod's graceful deletion.

Each `step()` takes one action (one write through the store, so watches see every step) and
says whether it did; `run()` steps until nothing is left to do. What it does, as the real ones:

- A dependent (an object with `ownerReferences`) whose owners are all gone or all waiting for
  their dependents (Foreground) is deleted: Foreground when it has dependents of its own and an
  owner is waiting, Background otherwise. One with a live owner left survives; the references
  to the gone or waiting owners are removed from it.
- An owner deleted with Foreground (`foregroundDeletion` finalizer) loses that finalizer once no
  dependent with `blockOwnerDeletion: true` is left; Orphan (`orphan`) removes its uid from every
  dependent's ownerReferences first.
- A terminating Namespace deletes everything in it, then drops its `kubernetes` finalizer and goes.
- A terminating CRD deletes its custom resources, then its cleanup finalizer, then stops serving.
- A terminating Pod (scheduled, not finished) goes when its grace period has passed, or at
  once when the kubelet confirms (`finish_pod`).

Not modelled: owner references to a different namespace or by kind/apiVersion mismatch, the
GC's discovery-driven resync delays, `foregroundDeletion` chains across uid reuse.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from aiperf.testing.fake_kube_api import Obj
from aiperf.testing.fake_kube_kinds import NAMESPACES, PODS
from aiperf.testing.fake_kube_store import CRD_FINALIZER, FOREGROUND, ORPHAN, Key, Store, parse_time


class GarbageCollector:
    """Finishes pending deletions in `store`, one write per `step()`."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def run(self, max_steps: int = 10_000) -> int:
        """Step until quiescent; returns the number of actions taken."""
        for taken in range(max_steps):
            if not self.step():
                return taken
        raise RuntimeError("the garbage collector did not settle")  # a bug in the fake, not a test failure

    def step(self) -> bool:
        """Take one pending action; False when there is none."""
        items = self._store.raw_items()
        by_uid = {obj["metadata"]["uid"]: obj for _, obj in items}
        children: dict[str, list[Key]] = {}
        for key, obj in items:
            for ref in obj["metadata"].get("ownerReferences") or []:
                children.setdefault(ref.get("uid", ""), []).append(key)
        for key, obj in items:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp") and self._finish_deletion(key, obj, items, children):
                return True
            if meta.get("ownerReferences") and not meta.get("deletionTimestamp") and \
                    self._collect_dependent(key, obj, by_uid, children):
                return True
        return False

    def finish_pod(self, key: Key) -> bool:
        """The kubelet confirms that a terminating pod's containers stopped: remove it (or leave
        it to its finalizers). False when the pod is not terminating."""
        obj = dict(self._store.raw_items()).get(key)
        if obj is None or not obj["metadata"].get("deletionTimestamp"):
            return False
        if not obj["metadata"].get("finalizers"):
            self._store.system_remove(key)
        else:
            updated = copy.deepcopy(obj)
            updated["metadata"]["deletionGracePeriodSeconds"] = 0
            self._store.system_update(PODS, updated)
        return True

    def seconds_to_next_deadline(self) -> float | None:
        """Seconds until the earliest terminating pod's grace period ends (None: none pending)."""
        now = datetime.now(UTC)
        waits = [(parse_time(obj["metadata"]["deletionTimestamp"]) - now).total_seconds()
                 for key, obj in self._store.raw_items()
                 if key[:2] == ("", "pods") and obj["metadata"].get("deletionGracePeriodSeconds")
                 and obj["metadata"].get("deletionTimestamp")]
        return max(0.0, min(waits)) if waits else None

    # -- actions ---------------------------------------------------------------------------------

    def _finish_deletion(self, key: Key, obj: Obj, items: list[tuple[Key, Obj]],
                         children: dict[str, list[Key]]) -> bool:
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if key[:2] == ("", "pods") and meta.get("deletionGracePeriodSeconds"):
            if parse_time(meta["deletionTimestamp"]) <= datetime.now(UTC):
                return self.finish_pod(key)
        if ORPHAN in finalizers:
            for child_key in children.get(meta["uid"], []):
                child = copy.deepcopy(dict(items)[child_key])
                child["metadata"]["ownerReferences"] = [r for r in child["metadata"]["ownerReferences"]
                                                        if r.get("uid") != meta["uid"]]
                self._store.system_update(self._store.info_of(child_key), child)
                return True
            return self._drop_finalizer(key, obj, ORPHAN)
        if FOREGROUND in finalizers:
            live = dict(self._store.raw_items())
            blocking = [k for k in children.get(meta["uid"], [])
                        if k in live and any(r.get("uid") == meta["uid"] and r.get("blockOwnerDeletion")
                                             for r in live[k]["metadata"].get("ownerReferences") or [])]
            if not blocking:
                return self._drop_finalizer(key, obj, FOREGROUND)
        if key[:2] == ("", "namespaces"):
            return self._finish_namespace(key, obj, items)
        if CRD_FINALIZER in finalizers and key[:2] == ("apiextensions.k8s.io", "customresourcedefinitions"):
            spec = obj["spec"]
            instances = [(k, o) for k, o in items if k[:2] == (spec["group"], spec["names"]["plural"])]
            if self._delete_each(instances):
                return True
            if not instances:
                return self._drop_finalizer(key, obj, CRD_FINALIZER)
        return False

    def _finish_namespace(self, key: Key, obj: Obj, items: list[tuple[Key, Obj]]) -> bool:
        contents = [(k, o) for k, o in items if k[2] == key[3] and k[:2] != ("", "namespaces")]
        if self._delete_each(contents):
            return True
        if contents:
            return False  # waiting for finalizers and terminating pods
        updated = copy.deepcopy(obj)
        updated.setdefault("spec", {})["finalizers"] = [f for f in (updated["spec"].get("finalizers") or [])
                                                        if f != "kubernetes"]
        if not updated["spec"]["finalizers"] and not updated["metadata"].get("finalizers"):
            self._store.system_remove(key)
            return True
        if updated != obj:
            self._store.system_update(NAMESPACES, updated)
            return True
        return False

    def _delete_each(self, objects: list[tuple[Key, Obj]]) -> bool:
        for k, o in objects:
            if not o["metadata"].get("deletionTimestamp"):
                self._store.delete(self._store.info_of(k), k[2], k[3], {"propagationPolicy": "Background"})
                return True
        return False

    def _drop_finalizer(self, key: Key, obj: Obj, finalizer: str) -> bool:
        updated = copy.deepcopy(obj)
        updated["metadata"]["finalizers"] = [f for f in updated["metadata"]["finalizers"] if f != finalizer]
        if not updated["metadata"]["finalizers"]:
            del updated["metadata"]["finalizers"]
        self._store.system_update(self._store.info_of(key), updated)
        return True

    def _collect_dependent(self, key: Key, obj: Obj, by_uid: dict[str, Obj],
                           children: dict[str, list[Key]]) -> bool:
        refs = obj["metadata"]["ownerReferences"]
        solid, gone, waiting = [], [], []
        for ref in refs:
            owner = by_uid.get(ref.get("uid", ""))
            if owner is None:
                gone.append(ref)
            elif owner["metadata"].get("deletionTimestamp") and FOREGROUND in (owner["metadata"].get("finalizers")
                                                                               or []):
                waiting.append(ref)
            else:
                solid.append(ref)
        if not gone and not waiting:
            return False
        info = self._store.info_of(key)
        if not solid:
            policy = "Foreground" if waiting and children.get(obj["metadata"]["uid"]) else "Background"
            self._store.delete(info, key[2], key[3], {"propagationPolicy": policy})
            return True
        updated = copy.deepcopy(obj)
        updated["metadata"]["ownerReferences"] = solid
        self._store.system_update(info, updated)
        return True
