"""What the AIPerfJob and AIPerfSweep reconcilers share: one `Reconciling` per custom resource
kind, over an injected `KubeApi` (no kopf here but its two error types, which say what happens
next).

- `write_status`: read the live CR, compute the change, send it as a JSON Patch fenced on UID,
  resourceVersion and phase; a lost race re-reads and recomputes (up to `MAX_ATTEMPTS`), so a
  stale view never overwrites a newer one. A phase change is counted in the metrics and
  recorded in the results index (`on_phase`).
- `admit`: the first step of every create: a CR created cancelled ends Cancelled, one whose
  spec cannot be planned ends Failed (`kopf.PermanentError`).
- `unfinished`: the first step of every sync: the live CR, unless it has ended or is asked to
  cancel (each handed to the reconciler's own step).
- `cancel`: honour `spec.cancel`: stop what the kind runs, then phase Cancelled.
- `terminal_once`/`end`: the terminal change, unless the CR already ended (the first verdict
  stands); `acknowledge`: record the consumed generation.
- `ensure`: create one of the CR's objects, or adopt the object holding its name only when its
  controller owner reference is this CR (name and UID); an older incarnation's or a terminating
  one is waited for (`kopf.TemporaryError`), a foreign one fails the CR (`kopf.PermanentError`).
  A create refused as invalid (422, e.g. JobSet's webhook) fails the CR with `ResourcesCreated`
  False `CreateRejected` and the API's message; a forbidden one (403: RBAC, OpenShift's owner
  reference check, a quota) records the same condition and is retried.
- `own_jobset`/`delete_jobset`: the CR's JobSet when this CR controls it; its UID-fenced delete.
- `warn`: a Warning Event on the CR, posted once (its name is its identity).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import kopf
import structlog

from aiperf.crd.model import JobPhase
from aiperf.kubeapi import JOBSETS, ApiError, KubeApi, Obj, Resource, resource_of, uid_of
from aiperf.operator.desired import InvalidSpec
from aiperf.operator.ownership import Verdict, claim, controller_of
from aiperf.operator.status import (
    TERMINAL,
    Cond,
    StatusChange,
    cancel_requested,
    phase_of,
    status_patch,
    terminal,
    timestamp,
)

MAX_ATTEMPTS = 5
REJECTED = "CreateRejected"
"""The `ResourcesCreated` reason when the API server refused to create one of the CR's objects."""
COMPONENT = "aiperf-operator"
"""The reporting component of the operator's Events."""
log = structlog.get_logger("aiperf.operator")

Compute = Callable[[Obj], StatusChange | None]
OnPhase = Callable[[Obj, JobPhase], Awaitable[None]]
Step = Callable[[Obj], Awaitable[None]]
Stop = Callable[[Mapping[str, Any]], Awaitable[str]]
P = TypeVar("P")


@dataclass(frozen=True)
class CrKind:
    """A custom resource kind the operator reconciles: its resource, and the name of the JobSet
    one CR of it owns."""

    resource: Resource
    jobset_name: Callable[[str], str]

    @property
    def kind(self) -> str:
        """`AIPerfJob` or `AIPerfSweep`."""
        return self.resource.kind


class Reconciling:
    """The shared steps of reconciling CRs of `kind` through `api` (see the module doc).
    `clock` returns an aware datetime; `retry_delay` is the seconds kopf waits before retrying;
    `on_phase(cr, phase)` runs after every phase change written."""

    def __init__(self, *, api: KubeApi, kind: CrKind, clock: Callable[[], datetime], retry_delay: float,
                 on_phase: OnPhase) -> None:
        self.api, self.kind, self.clock, self.retry_delay = api, kind, clock, retry_delay
        self._on_phase = on_phase

    async def read(self, ns: str, name: str, uid: str) -> Obj | None:
        """The live CR when it still has `uid`, else None."""
        cr = await self.api.get(self.kind.resource, ns, name)
        return cr if cr is not None and uid_of(cr) == uid else None

    async def admit(self, body: Mapping[str, Any], plan: Callable[[], P]) -> P | None:
        """The first step of creating CR `body`: None after ending it Cancelled when it was
        created with `spec.cancel`; else `plan()`, whose `InvalidSpec` ends it Failed (condition
        ConfigValid False) and raises `kopf.PermanentError`."""
        meta = body["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if cancel_requested(body):
            await self.write_status(ns, name, uid, self.end(JobPhase.CANCELLED, [
                Cond("Cancelled", True, "Cancelled", "spec.cancel was true at creation; nothing was started")]))
            return None
        try:
            return plan()
        except InvalidSpec as exc:
            problem = str(exc)
            await self.write_status(ns, name, uid, self.end(JobPhase.FAILED, [
                Cond("ConfigValid", False, "InvalidSpec", problem)]))
            raise kopf.PermanentError(f"invalid spec: {problem}") from None

    async def unfinished(self, ns: str, name: str, uid: str, *, finished: Step, cancel: Step) -> Obj | None:
        """The first step of syncing CR `ns/name`: the live CR (still of `uid`) when it has not
        ended and is not asked to cancel. Else None, once an ended CR went through `finished` and
        one with `spec.cancel` through `cancel`."""
        cr = await self.read(ns, name, uid)
        if cr is None:
            return None
        if phase_of(cr) in TERMINAL:
            await finished(cr)
            return None
        if cancel_requested(cr):
            await cancel(cr)
            return None
        return cr

    async def cancel(self, body: Mapping[str, Any], stop: Stop) -> None:
        """Honour `spec.cancel: true` on CR `body`: unless it has ended, `stop(body)` (what the
        kind stops), then phase Cancelled with the message `stop` returns. Always records the
        spec's generation in `status.observedGeneration`."""
        meta = body["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if cancel_requested(body) and phase_of(body) not in TERMINAL:
            message = await stop(body)
            await self.write_status(ns, name, uid, self.end(JobPhase.CANCELLED, [
                Cond("Cancelled", True, "Cancelled", message)]))
            log.info("cr.cancelled", kind=self.kind.kind, namespace=ns, name=name, message=message)
        await self.acknowledge(ns, name, uid)

    async def write_status(self, ns: str, name: str, uid: str, compute: Compute) -> Obj | None:
        """Read CR `ns/name`, apply `compute(cr)` as a fenced status patch, re-read and recompute
        after a lost race. Returns the CR as written (or as read when `compute` gave None), None
        when the CR is gone or replaced (a new UID). `kopf.TemporaryError` after `MAX_ATTEMPTS`
        lost races or an unexpected rejection."""
        for _ in range(MAX_ATTEMPTS):
            cr = await self.read(ns, name, uid)
            if cr is None:
                return None
            change = compute(cr)
            if change is None:
                return cr
            try:
                written = await self.api.patch(self.kind.resource, ns, name,
                                               status_patch(cr, change, now=self.clock()), status=True)
            except ApiError as exc:
                if exc.lost_race:
                    log.debug("status.lost_race", namespace=ns, name=name, detail=exc.describe())
                    continue
                if exc.not_found:
                    return None
                log.warning("status.rejected", namespace=ns, name=name, detail=exc.describe())
                raise kopf.TemporaryError(f"status write refused: {exc.describe()}", delay=self.retry_delay) from None
            if change.phase is not None and change.phase != phase_of(cr):
                await self._on_phase(written, change.phase)
            return written
        raise kopf.TemporaryError(f"status of {ns}/{name} kept changing under {MAX_ATTEMPTS} writes; retrying",
                                  delay=1)

    def terminal_once(self, cr: Mapping[str, Any], phase: JobPhase, conditions: list[Cond]) -> StatusChange | None:
        """The terminal change, unless the CR already ended (the first verdict stands)."""
        if phase_of(cr) in TERMINAL:
            return None
        change = terminal(phase, conditions, now=self.clock())
        values = dict(change.values)
        if (cr.get("status") or {}).get("observedGeneration") is None:
            values["observedGeneration"] = cr["metadata"].get("generation", 1)
        return StatusChange(values=values, conditions=change.conditions, remove=change.remove)

    def end(self, phase: JobPhase, conditions: list[Cond], values: Mapping[str, Any] | None = None) -> Compute:
        """`terminal_once` with `values` set too, as a status computation."""
        def compute(cr: Obj) -> StatusChange | None:
            change = self.terminal_once(cr, phase, conditions)
            if change is None or not values:
                return change
            return StatusChange(values={**change.values, **values}, conditions=change.conditions, remove=change.remove)
        return compute

    async def acknowledge(self, ns: str, name: str, uid: str) -> None:
        """Record the CR's current generation in `status.observedGeneration` (a consumed edit)."""
        await self.write_status(ns, name, uid, lambda cr: None if (cr.get("status") or {}).get(
            "observedGeneration") == cr["metadata"].get("generation") else StatusChange(
            values={"observedGeneration": cr["metadata"].get("generation", 1)}))

    async def ensure(self, obj: Obj, ns: str, name: str, uid: str) -> None:
        """Create `obj`, or adopt the object holding its name when it is this CR's (see the
        module doc for the other outcomes: a wait is recorded in `ResourcesCreated`, a foreign
        object fails the CR)."""
        kind, obj_name = obj["kind"], obj["metadata"]["name"]
        try:
            await self.api.create(obj)
            return
        except ApiError as exc:
            if exc.status == 422:  # invalid (a webhook's verdict included): the same object never passes
                rejected = [Cond("ResourcesCreated", False, REJECTED, f"{kind} {obj_name}: {exc.describe()}")]
                await self.write_status(ns, name, uid, self.end(JobPhase.FAILED, rejected))
                raise kopf.PermanentError(f"creating {kind} {obj_name} was refused: {exc.describe()}") from None
            if exc.status == 403:  # RBAC or a quota: a grant may still come; say why meanwhile
                refused = StatusChange(conditions=[Cond("ResourcesCreated", False, REJECTED,
                                                        f"{kind} {obj_name}: {exc.describe()}")])
                await self.write_status(ns, name, uid, lambda cr: None if phase_of(cr) in TERMINAL else refused)
            if exc.status != 409:
                raise kopf.TemporaryError(f"creating {kind} {obj_name} failed: {exc.describe()}",
                                          delay=self.retry_delay) from None
        existing = await self.api.get(resource_of(obj), ns, obj_name)
        if existing is None:  # gone between the create and the read: just try again
            raise kopf.TemporaryError(f"{kind} {obj_name} was being replaced; retrying", delay=1)
        verdict = claim(existing, owner_name=name, owner_uid=uid, owner_kind=self.kind.kind)
        if verdict.verdict is Verdict.ADOPT:
            return
        if verdict.verdict is Verdict.WAIT:
            waiting = StatusChange(conditions=[Cond("ResourcesCreated", False, "WaitingForPreviousRun", verdict.reason)])
            await self.write_status(ns, name, uid, lambda cr: waiting)
            raise kopf.TemporaryError(verdict.reason, delay=self.retry_delay)
        conflict = [Cond("ResourcesCreated", False, "NameConflict", verdict.reason)]
        await self.write_status(ns, name, uid, self.end(JobPhase.FAILED, conflict))
        raise kopf.PermanentError(verdict.reason)

    async def own_jobset(self, cr: Mapping[str, Any]) -> Obj | None:
        """The CR's JobSet when its controller owner is this CR (kind and UID), else None."""
        meta = cr["metadata"]
        jobset = await self.api.get(JOBSETS, meta["namespace"], self.kind.jobset_name(meta["name"]))
        if jobset is None:
            return None
        ref = controller_of(jobset)
        if ref is None or ref.get("uid") != meta["uid"] or ref.get("kind") != self.kind.kind:
            return None
        return jobset

    async def delete_jobset(self, cr: Mapping[str, Any]) -> None:
        """Delete the CR's own JobSet (UID precondition) unless it is gone or already going."""
        jobset = await self.own_jobset(cr)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return
        try:
            await self.api.delete(JOBSETS, cr["metadata"]["namespace"], jobset["metadata"]["name"],
                                  uid=uid_of(jobset))
        except ApiError as exc:
            if not exc.lost_race:
                raise

    async def delete_cr(self, cr: Mapping[str, Any]) -> bool:
        """Delete the CR itself (its own UID as precondition); True when deleted."""
        meta = cr["metadata"]
        try:
            return await self.api.delete(self.kind.resource, meta["namespace"], meta["name"], uid=meta["uid"])
        except ApiError as exc:
            if exc.lost_race:
                return False
            raise

    async def warn(self, cr: Mapping[str, Any], *, key: str, reason: str, message: str) -> bool:
        """Post a Warning Event about `cr` named by its UID and `key`, unless it exists; True when
        posted now. A refusal other than AlreadyExists is logged and dropped: a missing Event
        never blocks a run."""
        meta = cr["metadata"]
        stamp = timestamp(self.clock())
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"{meta['name']}.{meta['uid'][:8]}.{key}", "namespace": meta["namespace"]},
                 "involvedObject": {"apiVersion": self.kind.resource.api_version, "kind": self.kind.kind,
                                    "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
                 "type": "Warning", "reason": reason, "message": message,
                 "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
                 "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            await self.api.create(event)
        except ApiError as exc:
            if exc.status != 409:
                log.warning("operator.event_refused", name=meta["name"], detail=exc.describe())
            return False
        return True

__all__ = ["COMPONENT", "MAX_ATTEMPTS", "REJECTED", "Compute", "CrKind", "Reconciling", "Step", "Stop"]
