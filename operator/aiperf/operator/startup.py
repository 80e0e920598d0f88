"""Startup-blocker diagnosis for a run that has not started yet (`Pending`/`Initializing`).

Each `sync` of such a run lists its pods (the JobSet's, by label) and the `FailedCreate` Events
of its Jobs (pods refused at admission never exist: `create_failures`) and classifies them with
`aiperf.kube.diagnosis.classify`. The result lives in `status.startupIssue`:

- a new blocker is written with `firstObservedTime` = now; the same fingerprint keeps the time it
  has (also across operator restarts and recreated pods: the time is in the status, not in
  memory); no blocker removes it, and so does the run reaching `Running`;
- past `warn_after_s` a Warning Event `StartupBlocked` is posted on the AIPerfJob, once per
  fingerprint (its name is derived from the CR's UID and the fingerprint, so a second operator
  or a restart gets AlreadyExists instead of a duplicate);
- a critical blocker unchanged past its failure threshold (`fail_after_s`, or
  `unschedulable_fail_after_s` for a scheduling one, which a cluster autoscaler may still
  resolve) fails the run: condition `StartupFailed=True` with the blocker's reason, phase
  Failed, then the JobSet is deleted (UID precondition) as after a timeout. The failure is a
  claim: the status patch tests the CR's UID, resourceVersion, phase and
  `status.startupIssue.fingerprint`, so a replica acting on a stale read, or a blocker that
  changed meanwhile, cannot fail the run. Retryable blockers (capacity) are never failed here:
  `spec.timeoutSeconds` bounds them.

Why a list on each sync rather than a pod watch: kopf filters by label on the client side, so a
pod handler would receive every pod event of every watched namespace; the resync timer
(`--resync-interval`) and the JobSet's own events already run `sync`, and pods are listed only
for runs still starting, by a label selector the API server applies. A blocker is therefore
seen up to one resync interval late, which the thresholds (a minute and more) absorb.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from aiperf.crd.model import JobPhase
from aiperf.kube.diagnosis import FAILED_CREATE, Blocker, describe
from aiperf.kube.names import JOBSET_NAME_LABEL, JOBSET_UID_LABEL
from aiperf.kubeapi import EVENTS, PODS, KubeApi, Obj
from aiperf.operator.core import Reconciling
from aiperf.operator.status import Cond, StatusChange, cancel_requested, parse_time, phase_of, timestamp

STARTING = frozenset({JobPhase.PENDING, JobPhase.QUEUED, JobPhase.INITIALIZING})
ISSUE = "startupIssue"
FAILED_CONDITION = "StartupFailed"
WARNING_REASON = "StartupBlocked"
log = structlog.get_logger("aiperf.operator")


@dataclass(frozen=True, kw_only=True)
class StartupThresholds:
    """Seconds a blocker must persist (since its `firstObservedTime`) before a Warning Event, and
    before a critical one fails the run (see the module doc)."""

    warn_after_s: float = 60.0
    fail_after_s: float = 300.0
    unschedulable_fail_after_s: float = 600.0
    heartbeat_lost_after_s: float = 120.0
    """Not a startup threshold: how old the controller's heartbeat may get (`aiperf.operator.watchdog`)."""

    def fail_after(self, issue: Mapping[str, Any]) -> float | None:
        """The failure threshold of a `status.startupIssue`, None for a retryable one."""
        if issue.get("critical") is not True:
            return None
        return self.unschedulable_fail_after_s if issue.get("reason") == "Unschedulable" else self.fail_after_s


DEFAULT_THRESHOLDS = StartupThresholds()


def issue_of(cr: Mapping[str, Any]) -> Obj | None:
    """The CR's `status.startupIssue`, if any."""
    issue = (cr.get("status") or {}).get(ISSUE)
    return dict(issue) if issue else None


def age(issue: Mapping[str, Any], now: datetime) -> float:
    """Seconds since the issue was first observed (0 when its time is unreadable)."""
    first = parse_time(issue.get("firstObservedTime"))
    return max((now - first).total_seconds(), 0.0) if first is not None else 0.0


def issue_change(cr: Mapping[str, Any], blocker: Blocker | None, *, now: datetime) -> StatusChange | None:
    """The change of `status.startupIssue` for `blocker` seen on the CR read as `cr`: set it
    (keeping `firstObservedTime` when the fingerprint is unchanged), remove it when nothing
    blocks or the run is Running, nothing for a finished run (the issue explains its end)."""
    phase = phase_of(cr)
    if phase not in STARTING and phase != JobPhase.RUNNING:
        return None
    current = issue_of(cr)
    if blocker is None or phase not in STARTING:
        return StatusChange(remove=(ISSUE,)) if current is not None else None
    first = timestamp(now)
    if current is not None and current.get("fingerprint") == blocker.fingerprint and current.get("firstObservedTime"):
        first = str(current["firstObservedTime"])
    wanted = blocker.as_status(first)
    return None if wanted == current else StatusChange(values={ISSUE: wanted})


def failure(cr: Mapping[str, Any], fingerprint: str, *, now: datetime,
            thresholds: StartupThresholds) -> Cond | None:
    """The `StartupFailed` condition when the CR read as `cr` is still starting, not cancelled,
    and its startup issue still has `fingerprint`, is critical and has persisted past its
    threshold; else None (the claim is off)."""
    issue = issue_of(cr)
    if (phase_of(cr) not in STARTING or cancel_requested(cr) or issue is None
            or issue.get("fingerprint") != fingerprint):
        return None
    limit = thresholds.fail_after(issue)
    if limit is None or age(issue, now) < limit:
        return None
    return Cond(FAILED_CONDITION, True, str(issue.get("reason") or "StartupBlocked"),
                f"{describe(issue)} since {issue.get('firstObservedTime')} (over {limit:g} s): "
                f"{issue.get('message') or ''}".rstrip(": "))


def claim_fence(fingerprint: str) -> dict[str, Any]:
    """The extra JSON Patch tests of a startup failure (see `StatusChange.expect`)."""
    return {f"/status/{ISSUE}/fingerprint": fingerprint}


async def run_pods(api: KubeApi, jobset: Mapping[str, Any]) -> list[Obj]:
    """The pods of `jobset` (label `jobset.sigs.k8s.io/jobset-name`, and its UID label when the
    pod carries one, so a same-name predecessor's pods are left out)."""
    meta = jobset["metadata"]
    pods = (await api.list_all(PODS, meta["namespace"], label_selector=f"{JOBSET_NAME_LABEL}={meta['name']}")).items
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(JOBSET_UID_LABEL, meta["uid"]) == meta["uid"]]


async def create_failures(api: KubeApi, jobset: Mapping[str, Any]) -> list[Obj]:
    """The `FailedCreate` Events of `jobset`'s Jobs (`<jobset>-<replicatedJob>-<index>`) since
    the JobSet was created (a same-name predecessor's are older): pods the Job controller could
    not create (Pod Security, a missing ServiceAccount, a quota), which no pod list shows."""
    meta = jobset["metadata"]
    since = parse_time(meta.get("creationTimestamp"))
    prefix = f"{meta['name']}-"
    out = []
    for event in (await api.list_all(EVENTS, meta["namespace"])).items:
        involved = event.get("involvedObject") or {}
        seen = parse_time(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))
        if event.get("reason") == FAILED_CREATE and involved.get("kind") == "Job" and \
                str(involved.get("name", "")).startswith(prefix) and (since is None or seen is None or seen >= since):
            out.append(event)
    return out


async def warn_once(core: Reconciling, cr: Mapping[str, Any], issue: Mapping[str, Any]) -> bool:
    """Post the Warning Event for `issue` on the CR (named by the CR's UID and the issue's
    fingerprint) unless it exists. True when posted now; a refusal is logged and dropped."""
    kind = "will fail the run" if issue.get("critical") else "is retryable (spec.timeoutSeconds bounds it)"
    message = f"{describe(issue)} since {issue.get('firstObservedTime')}; it {kind}: {issue.get('message') or ''}"
    if not await core.warn(cr, key=str(issue.get("fingerprint")), reason=WARNING_REASON, message=message.rstrip(": ")):
        return False
    log.info("startup.blocked", namespace=cr["metadata"]["namespace"], name=cr["metadata"]["name"],
             reason=issue.get("reason"), pod=issue.get("pod"))
    return True
