"""The AIPerfSweep reconciler: plain async methods over an injected `KubeApi`, on the core it
shares with the AIPerfJob reconciler (`aiperf.operator.core.Reconciling`: fenced status writes,
create-or-adopt, the owned JobSet).

- `create`: validate the workload and plan it (`aiperf.operator.sweep_desired`), set
  `totalVariations`, `totalRuns` and a storable `runEpoch` (a creationTimestamp that yields no
  storable run key (`aiperf.results.keys`) is refused for good: status Failed with reason `SweepRejected` and a Warning
  Event, since creationTimestamp never changes), then create the sweep-controller's
  ServiceAccount, Role, RoleBinding and JobSet (owned by the sweep; adopted only when this CR's),
  phase Initializing.
- `rollup`: a child AIPerfJob changed phase: recompute `runStates` (child -> phase),
  `currentChild`/`currentChildRef` (the newest child still going), `lastChildEvent`,
  `completedRuns`/`failedRuns`/`progressPercent` from the children this sweep owns (controller
  owner reference with its UID; labels only narrow the list); Running once a child exists.
- `sync` (resync timer, resume, status.aggregation edits): once the sweep-controller has set
  `status.aggregation.phase: Complete`, harvest the aggregate from its results sidecar onto the
  results volume (`<ns>/sweeps/<name>/<epoch>/`, whole or not at all, `aggregate.json` must
  parse); a harvest that fails is retried and the JobSet kept (it holds the only copy). Then
  phase Completed (Failed when a variation fell below `minRuns`) with `resultsPath` and
  `resultsAvailable`, then the JobSet is deleted with its UID as precondition. A finished sweep
  past `ttlSecondsAfterFinished` is deleted with its own UID as precondition (a Completed one
  only once its results are on the volume).
- `cancel`: `spec.cancel`: cancel the current (every unfinished) owned child, phase Cancelled.
- `delete`: the sweep is being deleted: cancel only the children whose controller owner is this
  sweep's exact kind, name and UID (garbage collection removes them and the JobSet after).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import anyio
import kopf
import structlog

from aiperf.config.markers import SWEEP_AGGREGATE_FILES
from aiperf.crd.model import SWEEP_KIND, JobPhase
from aiperf.kube.names import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL, sweep_object_name
from aiperf.kubeapi import PODS, KubeApi, KubeClusterError, Obj
from aiperf.kuberun.direct import JobState, jobset_state, running_pod
from aiperf.kuberun.jobs import JOBS
from aiperf.kuberun.sweep_plan import SWEEP_LABEL, TRIAL_LABEL, VARIATION_LABEL, is_owned_by
from aiperf.kuberun.sweeps import SWEEPS, cancel_cr
from aiperf.operator.core import CrKind, Reconciling
from aiperf.operator.desired import CR_API_VERSION, Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.ownership import controller_of
from aiperf.operator.reconciler import new_epoch, phase_recorder
from aiperf.operator.results import ResultsStore
from aiperf.operator.status import (
    TERMINAL,
    Cond,
    StatusChange,
    cancel_requested,
    parse_time,
    phase_of,
    timestamp,
)
from aiperf.operator.sweep_desired import MAX_RESTARTS, SWEEP_JOB, plan_sweep
from aiperf.results.keys import is_key

SWEEP = CrKind(SWEEPS, sweep_object_name)
log = structlog.get_logger("aiperf.operator.sweep")
AGGREGATE_JSON = SWEEP_AGGREGATE_FILES[0]
REJECTED_REASON = "SweepRejected"


def storable_epoch(cr: Mapping[str, Any]) -> str | None:
    """The sweep's run epoch from its creationTimestamp and UID (`aiperf.results.keys.run_key`,
    the key every stored run has), None when it yields no storable key (before 1973, or
    unparsable)."""
    epoch = new_epoch(cr)
    return epoch if epoch is not None and is_key(epoch) else None


def results_name(name: str) -> str:
    """The sweep's folder on the results volume, below its namespace: `sweeps/<name>`."""
    return f"sweeps/{name}"


class SweepReconciler:
    """Reconciles AIPerfSweeps through `api` (see the module doc); phase changes are counted in
    `metrics`. `results`: the results volume (None: nothing is harvested; the sweep still
    completes)."""

    def __init__(self, *, api: KubeApi, metrics: Metrics, defaults: Defaults,
                 clock: Callable[[], datetime], retry_delay: float = 5.0,
                 results: ResultsStore | None = None) -> None:
        self._api, self._defaults = api, defaults
        self._clock, self._retry_delay, self._results = clock, retry_delay, results
        self.core = Reconciling(api=api, kind=SWEEP, clock=clock, retry_delay=retry_delay,
                                on_phase=phase_recorder(metrics, results))

    # -- create --------------------------------------------------------------------------------

    async def create(self, body: Mapping[str, Any]) -> None:
        """Start the sweep `body` (see the module doc). `kopf.PermanentError` for a spec that can
        never run, an unstorable epoch or a foreign object holding a name; `kopf.TemporaryError`
        while an older incarnation's objects are still there."""
        meta = body["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        epoch = storable_epoch(body) or ""
        planned = await self.core.admit(body, lambda: plan_sweep(body, defaults=self._defaults, epoch=epoch))
        if planned is None:
            return
        if not epoch:
            await self._reject_unstorable_epoch(body)
        now = timestamp(self._clock())

        def pending(cr: Obj) -> StatusChange | None:
            if phase_of(cr) is not None:
                return None
            return StatusChange(values={
                "phase": JobPhase.PENDING.value, "startTime": now, "runEpoch": epoch,
                "totalVariations": len(planned.plan.variations), "totalRuns": len(planned.plan.runs),
                "completedRuns": 0, "failedRuns": 0, "progressPercent": 0.0,
                "observedGeneration": cr["metadata"].get("generation", 1)},
                conditions=[Cond("ConfigValid", True, "Valid", "the spec is valid")])

        live = await self.core.write_status(ns, name, uid, pending)
        if live is None or phase_of(live) in TERMINAL:
            return
        for obj in planned.objects:
            await self.core.ensure(obj, ns, name, uid)
        created = StatusChange(values={"phase": JobPhase.INITIALIZING.value}, conditions=[
            Cond("ResourcesCreated", True, "Created", f"{', '.join(o['kind'] for o in planned.objects)} created")])
        await self.core.write_status(ns, name, uid, lambda cr: created if phase_of(cr) == JobPhase.PENDING else None)
        log.info("sweep.created", namespace=ns, name=name, runs=len(planned.plan.runs))

    async def _reject_unstorable_epoch(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        created = meta.get("creationTimestamp")
        message = (f"creationTimestamp {created} yields no storable run epoch (whole seconds since 1970, 9-10 "
                   "digits, plus 6); it never changes, so recreate the AIPerfSweep")
        await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [
            Cond("ConfigValid", True, "Valid", "the spec is valid"), Cond("Failed", True, REJECTED_REASON, message)]))
        await self.core.warn(body, key=REJECTED_REASON.lower(), reason=REJECTED_REASON, message=message)
        raise kopf.PermanentError(message)

    # -- children ------------------------------------------------------------------------------

    async def owned_children(self, ns: str, name: str, uid: str) -> list[Obj]:
        """The AIPerfJobs whose controller owner is exactly this sweep (name and UID)."""
        found = await self._api.list_all(JOBS, ns, label_selector=f"{SWEEP_LABEL}={name}")
        return [c for c in found.items if is_owned_by(c, name, uid)]

    async def child_event(self, child: Mapping[str, Any]) -> None:
        """A child AIPerfJob changed phase: roll it up into its sweep (nothing for a standalone job)."""
        ref = controller_of(child)
        if ref is None or ref.get("kind") != SWEEP_KIND or ref.get("apiVersion") != CR_API_VERSION:
            return
        await self.rollup(child["metadata"]["namespace"], str(ref["name"]), str(ref["uid"]))

    async def rollup(self, ns: str, name: str, uid: str) -> None:
        """Recompute the children's roll-up in the sweep's status (see the module doc)."""
        children = await self.owned_children(ns, name, uid)
        states = {c["metadata"]["name"]: (c.get("status") or {}).get("phase") or JobPhase.PENDING.value
                  for c in children}
        going = sorted((c for c in children if states[c["metadata"]["name"]] not in {p.value for p in TERMINAL}),
                       key=lambda c: (c["metadata"].get("creationTimestamp") or "", c["metadata"]["name"]))
        current = going[-1] if going else None
        order = [c["metadata"]["name"] for c in sorted(children, key=lambda c: (
            c["metadata"].get("creationTimestamp") or "", c["metadata"]["name"]))]
        now = timestamp(self._clock())
        completed = sum(1 for p in states.values() if p == JobPhase.COMPLETED.value)
        failed = sum(1 for p in states.values() if p in (JobPhase.FAILED.value, JobPhase.CANCELLED.value))

        def compute(cr: Obj) -> StatusChange | None:
            status = cr.get("status") or {}
            total = int(status.get("totalRuns") or 0)
            values: dict[str, Any] = {"runStates": states, "completedRuns": completed, "failedRuns": failed,
                                      "progressPercent": round(100.0 * (completed + failed) / total, 2) if total else 0.0}
            remove: list[str] = []
            if current is not None:
                labels = current["metadata"].get("labels") or {}
                ref: dict[str, Any] = {"name": current["metadata"]["name"], "uid": current["metadata"]["uid"]}
                for key, label in (("variation", VARIATION_LABEL), ("trial", TRIAL_LABEL)):
                    if str(labels.get(label, "")).isdigit():
                        ref[key] = int(labels[label])
                values["currentChild"], values["currentChildRef"] = ref["name"], ref
            else:
                remove = ["currentChild", "currentChildRef"]
            old = status.get("runStates") or {}
            changed = [n for n in order if old.get(n) != states[n]]
            if changed:  # whichever trigger sees a phase change first records it
                values["lastChildEvent"] = {"child": changed[-1], "phase": states[changed[-1]], "time": now}
            if phase_of(cr) in (JobPhase.PENDING, JobPhase.INITIALIZING) and children:
                values["phase"] = JobPhase.RUNNING.value
            if all(status.get(k) == v for k, v in values.items() if k != "lastChildEvent") and not changed and not any(k in status for k in remove):
                return None
            return StatusChange(values=values, remove=remove)

        await self.core.write_status(ns, name, uid, compute)

    # -- sync ----------------------------------------------------------------------------------

    async def sync(self, ns: str, name: str, uid: str) -> None:
        """Bring sweep `ns/name` (only while it has `uid`) forward (see the module doc)."""
        cr = await self.core.unfinished(ns, name, uid, finished=self._finished, cancel=self.cancel)
        if cr is None:
            return
        if phase_of(cr) in (None, JobPhase.PENDING):
            return  # the create handler is at work
        await self.rollup(ns, name, uid)
        aggregation = (cr.get("status") or {}).get("aggregation") or {}
        if aggregation.get("phase") == "Failed":
            await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [
                Cond("AggregateReady", False, "SweepFailed", str(aggregation.get("message") or "the sweep failed"))]))
            return
        jobset = await self.core.own_jobset(cr)
        if aggregation.get("phase") == "Complete":
            await self._harvest(cr, aggregation, jobset)
            return
        if jobset is None:
            await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [Cond(
                "ResourcesCreated", False, "JobSetMissing",
                f"JobSet {sweep_object_name(name)} was deleted before the sweep finished")]))
        elif jobset_state(jobset) == JobState.FAILED:
            await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [Cond(
                "AggregateReady", False, "SweepControllerFailed",
                f"the sweep-controller failed past {MAX_RESTARTS} restarts; see `aiperf kube logs`")]))

    async def _harvest(self, cr: Mapping[str, Any], aggregation: Mapping[str, Any], jobset: Obj | None) -> None:
        meta = cr["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        status = cr.get("status") or {}
        epoch = str(status.get("runEpoch") or "")
        values: dict[str, Any] = {"resultsAvailable": False}
        if self._results is not None:
            if jobset is None:
                await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [Cond(
                    "AggregateReady", False, "JobSetMissing", "the aggregate's only copy went with its JobSet")]))
                return
            pod = await self._controller_pod(ns, jobset)
            if pod is None:
                raise kopf.TemporaryError(f"the sweep-controller pod of {ns}/{name} is not running; retrying",
                                          delay=self._retry_delay)
            try:
                stored = await self._results.harvest(self._api, ns, results_name(name), epoch, pod, uid)
            except KubeClusterError as exc:
                log.warning("sweep.harvest_failed", namespace=ns, name=name, error=str(exc))
                raise kopf.TemporaryError(f"harvesting the aggregate of {ns}/{name} failed: {exc}; retrying "
                                          "(the JobSet is kept)", delay=self._retry_delay) from None
            folder = self._results.base / stored.path
            if not await anyio.to_thread.run_sync(_parses, folder / AGGREGATE_JSON):
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
                raise kopf.TemporaryError(f"the harvested {AGGREGATE_JSON} of {ns}/{name} is missing or does not "
                                          "parse; retrying (the JobSet is kept)", delay=self._retry_delay)
            values = {"resultsAvailable": True, "resultsPath": stored.path}
        failed = list(aggregation.get("failedVariations") or [])
        if failed:
            end = self.core.end(JobPhase.FAILED, [
                Cond("AggregateReady", True, "Harvested", str(aggregation.get("message"))),
                Cond("MinRunsMet", False, "TooFewSuccessfulRuns", f"below minRuns: {', '.join(failed)}")], values)
        else:
            end = self.core.end(JobPhase.COMPLETED, [
                Cond("AggregateReady", True, "Harvested", str(aggregation.get("message") or "aggregated"))], values)
        written = await self.core.write_status(ns, name, uid, end)
        log.info("sweep.finished", namespace=ns, name=name, results=values.get("resultsPath"))
        if written is not None:
            await self._finished(written)

    async def _finished(self, cr: Mapping[str, Any]) -> None:
        """A finished sweep: its harvested JobSet goes (UID precondition); past its TTL the CR goes."""
        meta = cr["metadata"]
        status = cr.get("status") or {}
        if status.get("resultsAvailable") is True or self._results is None:
            await self.core.delete_jobset(cr)
        ttl = (cr.get("spec") or {}).get("ttlSecondsAfterFinished")
        ttl = self._defaults.ttl_seconds if ttl is None else int(ttl)
        done = parse_time(status.get("completionTime"))
        if done is None or self._clock() < done + timedelta(seconds=ttl):
            return
        if phase_of(cr) == JobPhase.COMPLETED and self._results is not None and status.get("resultsAvailable") is not True:
            return
        if await self.core.delete_cr(cr):
            log.info("sweep.reaped", namespace=meta["namespace"], name=meta["name"], ttl=ttl)

    async def _controller_pod(self, ns: str, jobset: Mapping[str, Any]) -> str | None:
        selector = f"{JOBSET_NAME_LABEL}={jobset['metadata']['name']},{REPLICATED_JOB_LABEL}={SWEEP_JOB}"
        pods = (await self._api.list_all(PODS, ns, label_selector=selector)).items
        pod = running_pod(sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""))
        return str(pod["metadata"]["name"]) if pod is not None else None

    # -- cancel and delete ---------------------------------------------------------------------

    async def cancel(self, body: Mapping[str, Any]) -> None:
        """`spec.cancel: true`: cancel the sweep's unfinished children, phase Cancelled; always
        records the generation in `observedGeneration`."""

        async def stop(cr: Mapping[str, Any]) -> str:
            meta = cr["metadata"]
            ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
            cancelling = StatusChange(conditions=[
                Cond("Cancelling", True, "CancelRequested", "spec.cancel set; cancelling the current child")])
            await self.core.write_status(ns, name, uid, lambda live: None if phase_of(live) in TERMINAL else cancelling)
            cancelled = await self._cancel_children(ns, name, uid)
            return f"spec.cancel set; cancelled {', '.join(cancelled) or 'no child'}"

        await self.core.cancel(body, stop)

    async def acknowledge(self, ns: str, name: str, uid: str) -> None:
        """Record the sweep's generation in `status.observedGeneration` (a consumed edit)."""
        await self.core.acknowledge(ns, name, uid)

    async def delete(self, body: Mapping[str, Any]) -> None:
        """The sweep is being deleted: cancel the unfinished children it owns (UID-exact)."""
        meta = body["metadata"]
        cancelled = await self._cancel_children(meta["namespace"], meta["name"], meta["uid"])
        log.info("sweep.deleted", namespace=meta["namespace"], name=meta["name"], children=cancelled)

    async def _cancel_children(self, ns: str, name: str, uid: str) -> list[str]:
        out = []
        for child in await self.owned_children(ns, name, uid):
            if (child.get("status") or {}).get("phase") in {p.value for p in TERMINAL}:
                continue
            if cancel_requested(child):  # the sweep-controller was first
                out.append(child["metadata"]["name"])
                continue
            try:
                if await cancel_cr(self._api, JOBS, child):
                    out.append(child["metadata"]["name"])
            except KubeClusterError as exc:
                raise kopf.TemporaryError(str(exc), delay=self._retry_delay) from None
        return out


def _parses(path: Any) -> bool:
    try:
        return isinstance(json.loads(path.read_bytes()), dict)
    except (OSError, ValueError):
        return False


__all__ = ["SweepReconciler", "results_name", "storable_epoch"]
