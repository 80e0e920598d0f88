"""The runs of a namespace as `kube list`, `kube list --watch` and `kube cleanup` see them: one
`Run` per AIPerfJob (operator mode, when the cluster serves the CRD) and per direct-mode JobSet
(one that no AIPerfJob controls: those belong to their CR and are not listed twice)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from aiperf.crd.model import JOB_KIND
from aiperf.kubeapi import JOBSETS, ApiError, KubeApi, KubeClusterError, Listing, Obj, Resource
from aiperf.kuberun import direct, jobs

SELECTOR = direct.RUN_SELECTOR
"""The label every direct-mode JobSet carries (the operator's JobSets too)."""

FINISHED_PHASES = frozenset(str(p) for p in jobs.TERMINAL_PHASES)
FINISHED_STATES = frozenset(str(s) for s in direct.TERMINAL)


@dataclass(frozen=True, kw_only=True)
class Run:
    """One run: its object (`kind` AIPerfJob or JobSet, `object_name`, `uid`), its run `name`,
    `state` (the CR's phase, or the JobSet's state), `progress` (`done/total` requests, CRs only),
    and when it was created and finished (RFC 3339, None when unknown or not finished)."""

    kind: str
    namespace: str
    name: str
    object_name: str
    uid: str
    state: str
    progress: str
    created: str | None
    finished: str | None

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the run's object across events (kind, namespace, object name)."""
        return self.kind, self.namespace, self.object_name

    @property
    def done(self) -> bool:
        """The run ended: Completed, Failed or Cancelled (a CR), Completed or Failed (a JobSet;
        a Suspended one may be queued, so it is not finished)."""
        return self.state in (FINISHED_PHASES if self.kind == JOB_KIND else FINISHED_STATES)


def _progress(status: Obj) -> str:
    done, total = status.get("requestsCompleted"), status.get("requestsTotal")
    if done is None:
        return ""
    return f"{done}/{total if total is not None else '?'}"


def run_of_job(job: Obj) -> Run:
    """The run of an AIPerfJob."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    phase = jobs.phase_of(job)
    return Run(kind=JOB_KIND, namespace=meta.get("namespace", ""), name=meta.get("name", ""),
               object_name=meta.get("name", ""), uid=meta.get("uid", ""),
               state=str(phase) if phase else "Pending", progress=_progress(status),
               created=meta.get("creationTimestamp"),
               finished=status.get("completionTime") if phase in jobs.TERMINAL_PHASES else None)


def run_of_jobset(jobset: Obj) -> Run | None:
    """The run of a direct-mode JobSet; None for a JobSet an AIPerfJob controls (it is that CR's)."""
    meta = jobset.get("metadata") or {}
    if any(o.get("kind") == JOB_KIND and o.get("controller") for o in meta.get("ownerReferences") or []):
        return None
    summary = direct.summarize(jobset)
    finished = None
    if summary.state in direct.TERMINAL:
        finished = next((c.get("lastTransitionTime") for c in (jobset.get("status") or {}).get("conditions") or []
                         if c.get("type") == str(summary.state) and c.get("status") == "True"), None)
    return Run(kind="JobSet", namespace=summary.namespace, name=summary.name, object_name=summary.jobset,
               uid=summary.uid, state=str(summary.state), progress="", created=summary.created,
               finished=finished)


def job_path(namespace: str | None) -> str:
    """The AIPerfJob collection of `namespace` (None: every namespace)."""
    return jobs.JOBS.path(namespace)


def jobset_path(namespace: str | None) -> str:
    """The JobSet collection of `namespace` (None: every namespace)."""
    return JOBSETS.path(namespace)


@dataclass(frozen=True)
class Collections:
    """The two listings runs come from: AIPerfJobs (None: the CRD is not served) and JobSets."""

    jobs: Listing | None
    jobsets: Listing

    def runs(self) -> list[Run]:
        """Every run, oldest first."""
        found = [run_of_job(j) for j in self.jobs.items] if self.jobs is not None else []
        found += [r for r in map(run_of_jobset, self.jobsets.items) if r is not None]
        return sorted(found, key=lambda r: (r.created or "", r.namespace, r.name, r.kind))


async def list_runs(api: KubeApi, namespace: str | None) -> Collections:
    """List the AIPerfJobs (when served) and the aiperf JobSets of `namespace` (None: all).
    KubeClusterError when the JobSet API is not installed or a list fails."""
    job_listing = await served(api, jobs.JOBS, namespace)
    jobset_listing = await served(api, JOBSETS, namespace, label_selector=SELECTOR)
    if jobset_listing is None:
        raise KubeClusterError("the JobSet API (jobset.x-k8s.io) is not installed in this cluster; "
                               "install JobSet first")
    return Collections(job_listing, jobset_listing)


async def served(api: KubeApi, resource: Resource, namespace: str | None, *,
                 label_selector: str | None = None) -> Listing | None:
    """Every object of `resource` in `namespace` (None: all), narrowed by `label_selector`;
    None when the API server does not serve the type (404). KubeClusterError for another error."""
    try:
        return await api.list_all(resource, namespace, label_selector=label_selector)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise KubeClusterError(f"listing {resource.plural} failed: {exc.describe()}") from None


def age(timestamp: str | None, now: datetime) -> str:
    """`timestamp` (RFC 3339) as an age: 42s, 5m, 3h, 2d; `?` when missing or malformed."""
    seconds = age_seconds(timestamp, now)
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds), 0)}s"


def age_seconds(timestamp: str | None, now: datetime) -> float | None:
    """Seconds from `timestamp` (RFC 3339) to `now`; None when missing or malformed."""
    if not timestamp:
        return None
    try:
        return (now - datetime.fromisoformat(timestamp.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return None


def now() -> datetime:
    """The current time (UTC)."""
    return datetime.now(UTC)
