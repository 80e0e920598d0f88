"""The AIPerfJob reconciler: plain async methods over an injected `KubeApi` (no kopf here but
its two error types, which say what happens next).

- `create`: decode and check the spec, seed `status.workers` (`ready` 0, `total` planned: the
  controller's first push takes it over), then create the run's objects in order (ServiceAccount,
  Role, RoleBinding, CURVE key Secret filled with a fresh key pair, ConfigMap, JobSet), each with
  a controller owner reference to the CR, and move the run to Initializing. A name already taken is adopted only when the object is this
  CR's (`ownership.claim`); an older incarnation's or a terminating one is waited for
  (`kopf.TemporaryError`), anything else fails the run (`kopf.PermanentError`).
- `sync`: the one idempotent step every trigger runs (JobSet events, the resync timer, resume,
  edits of `spec.timeoutSeconds`): cancel when `spec.cancel`, time out past the deadline; once
  the controller pod's control plane has exited, copy the results to the results volume
  (`aiperf.operator.results`) and end the run Completed (Failed when it exited non-zero), then
  shut the results sidecar down; else follow the JobSet into the status; finished runs get their
  clean-up re-checked. A JobSet gone before the end (`_jobset_missing`): Completed from the
  volume when a harvest already stored the results, Failed `ResultsLost` when the controller had
  exported them, else Failed `JobSetMissing`.
- `cancel`: the `spec.cancel` edit: suspend the JobSet, phase Cancelled.
- timeout: past `spec.timeoutSeconds` the run fails (`TimedOut`) and its JobSet is deleted,
  unless the controller has reported `status.resultsExported: true`: then the finished results
  are not thrown away; `TimedOut` False `DrainingResults` says so and the harvest ends the run
  (for at most `DRAIN_GRACE_S` more seconds).
- the controller's watchdog (`aiperf.operator.watchdog`): a reported `controllerFailure` fails
  the run at once with the controller's reason; a heartbeat older than
  `thresholds.heartbeat_lost_after_s` fails it and deletes its JobSet.
- startup diagnosis (`aiperf.operator.startup`): each `sync` of a run still starting records
  what blocks its pods in `status.startupIssue`, warns, and fails it once a critical blocker
  persists.

The first steps of `create` and `sync`, the frame of `cancel`, status writes, object creation
and adoption, the JobSet lookup and its fenced delete are the shared core of both reconcilers
(`aiperf.operator.core.Reconciling`). Nothing here deletes the
CR's dependents on CR deletion: their owner references make the garbage collector do it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
import structlog

from aiperf.comms import CurveKeys
from aiperf.crd.model import JobPhase
from aiperf.kube import with_curve_keys
from aiperf.kube.diagnosis import classify
from aiperf.kube.names import KEEP_SIDECAR_ANNOTATION, jobset_name
from aiperf.kubeapi import (
    JOBSETS,
    ApiError,
    KubeApi,
    KubeClusterError,
    KubeError,
    Obj,
    fenced,
    leaving,
    uid_of,
)
from aiperf.kuberun import sidecar
from aiperf.kuberun.direct import JobState, jobset_state
from aiperf.kuberun.jobs import JOBS
from aiperf.operator import startup, watchdog
from aiperf.operator.core import CrKind, Reconciling
from aiperf.operator.desired import CR_API_VERSION, Defaults, JobPlan, plan_job
from aiperf.operator.metrics import Metrics
from aiperf.operator.ownership import controller_of
from aiperf.operator.results import ResultsStore, RunDeleted, epoch_of
from aiperf.operator.status import (
    TERMINAL,
    Cond,
    StatusChange,
    condition_of,
    deadline,
    forward,
    is_true,
    observe_jobset,
    phase_of,
    timestamp,
    took_over,
)

JOB = CrKind(JOBS, jobset_name)
DRAIN_GRACE_S = 600.0
"""Seconds past `spec.timeoutSeconds` a run whose controller reported `resultsExported` gets for
its control plane to exit and the harvest to copy the results, before it times out after all."""
log = structlog.get_logger("aiperf.operator")


def utc_now() -> datetime:
    """The wall clock, in UTC (the default `clock`)."""
    return datetime.now(UTC)


class JobReconciler:
    """Reconciles AIPerfJobs through `api`. `defaults` fill what a CR leaves out; `clock` returns
    an aware datetime (injected for tests); `retry_delay` is the seconds kopf waits before
    retrying a create that waits for an older incarnation's objects to go; `thresholds` time the
    startup diagnosis. `results`: the results volume finished runs are copied to (None: the run
    ends with its JobSet, nothing is copied)."""

    def __init__(self, *, api: KubeApi, defaults: Defaults, metrics: Metrics,
                 clock: Callable[[], datetime] = utc_now, retry_delay: float = 5.0,
                 thresholds: startup.StartupThresholds = startup.DEFAULT_THRESHOLDS,
                 results: ResultsStore | None = None) -> None:
        self._api, self._defaults = api, defaults
        self._clock, self._retry_delay, self._thresholds = clock, retry_delay, thresholds
        self._results = results
        self.core = Reconciling(api=api, kind=JOB, clock=clock, retry_delay=retry_delay,
                                on_phase=phase_recorder(metrics, results))

    # -- create --------------------------------------------------------------------------------

    async def create(self, body: Mapping[str, Any]) -> None:
        """Create the run of the new CR `body` (see the module doc). Raises `kopf.PermanentError`
        for a spec that can never run or a name held by a foreign object (the status says why,
        phase Failed), `kopf.TemporaryError` while an older incarnation's objects still exist."""
        meta = body["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        plan = await self.core.admit(body, lambda: plan_job(body, defaults=self._defaults))
        if plan is None:
            return
        now = timestamp(self._clock())

        def pending(cr: Obj) -> StatusChange | None:
            if phase_of(cr) is not None:
                return None
            epoch = new_epoch(cr)
            values: dict[str, Any] = {"phase": JobPhase.PENDING.value, "startTime": now,
                                      "observedGeneration": cr["metadata"].get("generation", 1)}
            if not took_over(cr):  # the plan's count until the controller's first push
                values["workers"] = {"ready": 0, "total": plan.settings.total_workers}
            if epoch is not None:
                values["runEpoch"] = epoch
            return StatusChange(values=values, conditions=[Cond("ConfigValid", True, "Valid", "the spec is valid")])

        live = await self.core.write_status(ns, name, uid, pending)
        if live is None or phase_of(live) in TERMINAL:
            return
        if self._results is not None and (epoch := epoch_of(live)) is not None:
            await self._results.created(ns, name, epoch, uid=uid, created_at=meta.get("creationTimestamp"))
        await self._create_objects(plan, ns, name, uid)
        await self.core.write_status(ns, name, uid, lambda cr: None if phase_of(cr) in TERMINAL else StatusChange(
            values={"phase": p.value} if (p := forward(phase_of(cr), JobPhase.INITIALIZING)) else {},
            conditions=[Cond("ResourcesCreated", True, "Created",
                             f"{', '.join(o['kind'] for o in plan.objects)} created")]))
        log.info("run.created", namespace=ns, name=name, uid=uid)
        await self.sync(ns, name, uid)  # a cancel that arrived meanwhile, or a JobSet already running

    async def _create_objects(self, plan: JobPlan, ns: str, name: str, uid: str) -> None:
        # The run's CURVE keys exist only here and in the Secret (never in the plan, a log or the
        # status): without them every pod exits 2 at start. A Secret this CR already owns (a
        # retried create) is adopted with the keys it holds.
        for obj in with_curve_keys(plan.objects, CurveKeys.generate()):
            await self.core.ensure(obj, ns, name, uid)

    # -- sync ----------------------------------------------------------------------------------

    async def sync(self, ns: str, name: str, uid: str) -> None:
        """Bring the status of CR `ns/name` (only while it has `uid`) up to date with its JobSet,
        its deadline and `spec.cancel` (see the module doc). Idempotent; safe to call any time."""
        cr = await self.core.unfinished(ns, name, uid, finished=self._clean_up_finished, cancel=self.cancel)
        if cr is None:
            return
        due = deadline(cr)
        if due is not None and self._clock() >= due:
            if not results_exported(cr) or self._clock() >= due + timedelta(seconds=DRAIN_GRACE_S):
                await self._time_out(cr)
                return
            await self._draining(cr)  # the exports are written: let the harvest end the run
        if not is_true(cr, "ResourcesCreated"):
            return  # the create handler is still at work
        if await self._watch_controller(cr):
            return
        jobset = await self.core.own_jobset(cr)
        if jobset is None:
            await self._jobset_missing(cr)
            return
        if self._results is not None and jobset_state(jobset) == JobState.RUNNING:
            end = await sidecar.controller_end(self._api, name, ns, jobset_uid=jobset["metadata"]["uid"])
            if end is not None and end.pod is not None:
                await self._finish(cr, end.exit_code, end.pod)
                return
        now = self._clock()
        written = await self.core.write_status(ns, name, uid, lambda live: observe_jobset(live, jobset, now=now))
        if written is not None:
            await self._diagnose_startup(written, jobset)

    async def _diagnose_startup(self, cr: Mapping[str, Any], jobset: Mapping[str, Any]) -> None:
        """Record, warn about and (past its threshold, through a fenced claim) fail on what blocks
        the pods of a run still starting (see `aiperf.operator.startup`)."""
        meta = cr["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if phase_of(cr) not in startup.STARTING:
            if phase_of(cr) == JobPhase.RUNNING and startup.issue_of(cr) is not None:  # the pods run now
                await self.core.write_status(ns, name, uid,
                                             lambda live: startup.issue_change(live, None, now=self._clock()))
            return
        try:
            pods = await startup.run_pods(self._api, jobset)
            refused = await startup.create_failures(self._api, jobset)
        except ApiError as exc:
            raise kopf.TemporaryError(f"listing the pods of {name} failed: {exc.describe()}",
                                      delay=self._retry_delay) from None
        blocker = classify(pods, refused)
        now = self._clock()
        live = await self.core.write_status(ns, name, uid, lambda read: startup.issue_change(read, blocker, now=now))
        issue = startup.issue_of(live) if live is not None else None
        if live is None or issue is None:
            return
        fingerprint = str(issue.get("fingerprint"))
        if startup.failure(live, fingerprint, now=now, thresholds=self._thresholds) is None:
            if startup.age(issue, now) >= self._thresholds.warn_after_s:
                await startup.warn_once(self.core, live, issue)
            return

        def claim(read: Obj) -> StatusChange | None:
            cond = startup.failure(read, fingerprint, now=now, thresholds=self._thresholds)
            change = self.core.terminal_once(read, JobPhase.FAILED, [cond]) if cond is not None else None
            return replace(change, expect=startup.claim_fence(fingerprint)) if change is not None else None

        failed = await self.core.write_status(ns, name, uid, claim)
        if failed is not None and is_true(failed, startup.FAILED_CONDITION):
            log.info("run.startup_failed", namespace=ns, name=name, reason=issue.get("reason"))
            await self._clean_up_finished(failed)

    async def jobset_event(self, jobset: Mapping[str, Any]) -> None:
        """A JobSet changed (or was listed, or deleted): sync the AIPerfJob that controls it."""
        ref = controller_of(jobset)
        if ref is None or ref.get("kind") != JOB.kind or ref.get("apiVersion") != CR_API_VERSION:
            return
        await self.sync(jobset["metadata"]["namespace"], str(ref["name"]), str(ref["uid"]))

    # -- the run's end -------------------------------------------------------------------------

    async def _finish(self, cr: Mapping[str, Any], exit_code: int | None, pod: str) -> None:
        """The control plane of `pod` has exited: on success copy the results to the volume, then
        phase Completed with `resultsPath` and `runEpoch`; on failure phase Failed. Then shut the
        results sidecar down (the JobSet completes), unless the CR asks to keep it. A copy that
        fails is retried (`kopf.TemporaryError`) and the run stays Running meanwhile."""
        meta = cr["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        assert self._results is not None
        if exit_code == 0:
            epoch = epoch_of(cr)
            if epoch is None:
                raise kopf.PermanentError(f"{ns}/{name} has no creationTimestamp a results directory can be named by")
            try:
                stored = await self._results.harvest(self._api, ns, name, epoch, pod, uid,
                                                     created_at=meta.get("creationTimestamp"),
                                                     completed_at=timestamp(self._clock()),
                                                     gone=lambda: self._being_deleted(ns, name, uid))
            except RunDeleted:
                log.info("results.dropped_deleted_run", namespace=ns, name=name, epoch=epoch)
                return
            except KubeClusterError as exc:
                log.warning("results.copy_failed", namespace=ns, name=name, pod=pod, error=str(exc))
                raise kopf.TemporaryError(f"copying the results of {ns}/{name} from pod {pod} failed: {exc}; "
                                          "retrying", delay=self._retry_delay) from None
            log.info("results.stored", namespace=ns, name=name, path=stored.path, files=len(stored.files))
            done = Cond("ResultsStored", True, "Stored", f"{len(stored.files)} files under {stored.path}")
            values = {"resultsPath": stored.path, "runEpoch": epoch}
            written = await self.core.write_status(ns, name, uid, self.core.end(JobPhase.COMPLETED, [done], values))
        else:
            failed = Cond("ResultsStored", False, "ControlPlaneFailed",
                          f"the control plane exited {exit_code}; see `aiperf kube logs {name} -n {ns}`")
            written = await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [failed]))
        if written is None or (meta.get("annotations") or {}).get(KEEP_SIDECAR_ANNOTATION) == "true":
            return
        try:
            await sidecar.shutdown_sidecar(self._api, ns, pod)
        except KubeClusterError as exc:  # it exits by itself after its linger time
            log.warning("results.sidecar_shutdown_failed", namespace=ns, name=name, pod=pod, error=str(exc))

    async def _being_deleted(self, ns: str, name: str, uid: str) -> bool:
        """CR `ns/name` of `uid` is being deleted or is gone; False when it cannot be read."""
        try:
            cr = await self._api.get(JOBS, ns, name)
        except KubeError:
            return False
        return leaving(cr, uid)

    async def deleted(self, body: Mapping[str, Any]) -> None:
        """CR `body` is being deleted: its run's results, unless already stored, are dropped
        (an in-flight harvest stops and stores nothing; see `aiperf.operator.results`)."""
        meta = body["metadata"]
        epoch = epoch_of(body)
        if self._results is not None and epoch is not None:
            await self._results.deleted(meta["namespace"], meta["name"], epoch)
            log.info("run.deleted", namespace=meta["namespace"], name=meta["name"], epoch=epoch)

    # -- cancel and timeout --------------------------------------------------------------------

    async def cancel(self, body: Mapping[str, Any]) -> None:
        """Honour `spec.cancel: true` on CR `body`: suspend its JobSet (UID-fenced; its pods stop,
        the JobSet stays as the run's record until the CR goes), then phase Cancelled. Always
        records the spec's generation in `status.observedGeneration`. A finished run is left as is."""

        async def stop(cr: Mapping[str, Any]) -> str:
            await self._suspend_jobset(cr)
            return "spec.cancel set; the JobSet was suspended"

        await self.core.cancel(body, stop)

    async def acknowledge(self, ns: str, name: str, uid: str) -> None:
        """Record the CR's current generation in `status.observedGeneration` (a consumed edit)."""
        await self.core.acknowledge(ns, name, uid)

    async def _time_out(self, cr: Mapping[str, Any]) -> None:
        meta = cr["metadata"]
        seconds = (cr.get("spec") or {}).get("timeoutSeconds")
        written = await self.core.write_status(meta["namespace"], meta["name"], meta["uid"], self.core.end(
            JobPhase.FAILED, [Cond("TimedOut", True, "Timeout", f"the run exceeded timeoutSeconds {seconds}")]))
        log.info("run.timed_out", namespace=meta["namespace"], name=meta["name"], seconds=seconds)
        if written is not None:
            await self._clean_up_finished(written)

    async def _watch_controller(self, cr: Mapping[str, Any]) -> bool:
        """Fail the run on the controller's reported failure or a lost heartbeat
        (`aiperf.operator.watchdog`); True when the run ended so."""
        meta = cr["metadata"]
        now = self._clock()
        lost_after = self._thresholds.heartbeat_lost_after_s

        def verdict(live: Mapping[str, Any]) -> Cond | None:
            return watchdog.failure_reported(live) or watchdog.heartbeat_lost(live, now=now, lost_after_s=lost_after)

        if verdict(cr) is None:
            return False
        written = await self.core.write_status(meta["namespace"], meta["name"], meta["uid"], lambda live: (
            self.core.terminal_once(live, JobPhase.FAILED, [cond]) if (cond := verdict(live)) else None))
        if written is None or not is_true(written, watchdog.FAILED_CONDITION):
            return False
        log.info("run.controller_failed", namespace=meta["namespace"], name=meta["name"],
                 reason=(condition_of(written, watchdog.FAILED_CONDITION) or {}).get("reason"))
        await self._clean_up_finished(written)
        return True

    async def _jobset_missing(self, cr: Mapping[str, Any]) -> None:
        """The run's JobSet is gone before the run ended (its `ttlSecondsAfterFinished` passed
        while the operator was down, or someone deleted it): Completed when its results are on
        the volume already (a harvest whose phase write was lost), Failed `ResultsLost` when the
        controller had exported them but nobody copied them, else Failed `JobSetMissing`."""
        meta = cr["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        epoch = epoch_of(cr)
        stored = await self._results.stored(ns, name, epoch, uid) if self._results and epoch else None
        if stored is not None:
            done = Cond("ResultsStored", True, "Stored", f"{len(stored.files)} files under {stored.path}")
            await self.core.write_status(ns, name, uid, self.core.end(JobPhase.COMPLETED, [done], {
                "resultsPath": stored.path, "runEpoch": epoch}))
            return
        if results_exported(cr):
            lost = Cond("ResultsStored", False, "ResultsLost",
                        f"JobSet {jobset_name(name)} was deleted (ttlSecondsAfterFinished passed, or by hand) after "
                        "the controller exported the results but before the operator copied them; raise "
                        "ttlSecondsAfterFinished or keep the operator running")
            await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [lost]))
            return
        await self.core.write_status(ns, name, uid, self.core.end(JobPhase.FAILED, [
            Cond("ResourcesCreated", False, "JobSetMissing",
                 f"JobSet {jobset_name(name)} was deleted before the run finished")]))

    async def _draining(self, cr: Mapping[str, Any]) -> None:
        meta = cr["metadata"]
        seconds = (cr.get("spec") or {}).get("timeoutSeconds")
        drain = Cond("TimedOut", False, "DrainingResults",
                     f"timeoutSeconds {seconds} passed after the controller exported the results; the harvest "
                     f"may take {DRAIN_GRACE_S:g} s more")
        await self.core.write_status(meta["namespace"], meta["name"], meta["uid"], lambda live: None if (
            condition_of(live, "TimedOut") or {}).get("reason") == drain.reason else StatusChange(conditions=[drain]))

    async def _clean_up_finished(self, cr: Mapping[str, Any]) -> None:
        """A timed-out, startup-failed or heartbeat-lost run's JobSet is deleted, a cancelled
        one's suspended (idempotent)."""
        if phase_of(cr) == JobPhase.CANCELLED:
            await self._suspend_jobset(cr)
        elif is_true(cr, "TimedOut") or is_true(cr, startup.FAILED_CONDITION) or (
                condition_of(cr, watchdog.FAILED_CONDITION) or {}).get("reason") == watchdog.HEARTBEAT_LOST:
            await self.core.delete_jobset(cr)

    async def _suspend_jobset(self, cr: Mapping[str, Any]) -> None:
        jobset = await self.core.own_jobset(cr)
        if jobset is None or jobset_state(jobset) != JobState.RUNNING or (jobset.get("spec") or {}).get("suspend"):
            return
        meta = jobset["metadata"]
        try:
            await self._api.patch(JOBSETS, meta["namespace"], meta["name"],
                                  fenced(uid_of(jobset), {"op": "add", "path": "/spec/suspend", "value": True}))
        except ApiError as exc:
            if exc.not_found or exc.lost_race:
                log.debug("jobset.suspend_lost_race", name=meta["name"])
                return
            raise kopf.TemporaryError(f"suspending JobSet {meta['name']} failed: {exc.describe()}",
                                      delay=self._retry_delay) from None


def results_exported(cr: Mapping[str, Any]) -> bool:
    """True when the run's controller reported that its exports are written."""
    return (cr.get("status") or {}).get("resultsExported") is True


def new_epoch(cr: Mapping[str, Any]) -> str | None:
    """The run key of a new CR (`aiperf.results.keys.run_key`: creation second + UID suffix)."""
    return epoch_of({"metadata": cr["metadata"]})


def phase_recorder(metrics: Metrics, results: ResultsStore | None) -> Callable[[Obj, JobPhase], Awaitable[None]]:
    """What a written phase change does beside the status: count it in `metrics`, and mirror it
    into the results index (Completed comes from the harvest)."""

    async def record(cr: Obj, phase: JobPhase) -> None:
        metrics.entered_phase(phase.value)
        epoch = epoch_of(cr)
        if results is None or epoch is None or phase == JobPhase.COMPLETED:
            return
        meta = cr["metadata"]
        await results.phase(meta["namespace"], meta["name"], epoch, uid=meta["uid"], phase=phase.value,
                            created_at=meta.get("creationTimestamp"))

    return record
