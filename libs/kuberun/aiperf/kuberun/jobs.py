"""Operator-mode runs: AIPerfJob custom resources, through `aiperf.kubeapi`.

Like `aiperf.kuberun.direct`: every function takes a `KubeApi`, raises `KubeError` with one line
for what the user can fix and `KubeClusterError` for a failure of the cluster. An AIPerfJob's
`status.phase` is written by the operator; these functions only create the CR, read it, set
`spec.cancel` (a JSON Patch fenced on the UID, so a same-name replacement is never cancelled by
mistake), delete it (UID precondition) and watch it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import aclosing
from enum import StrEnum
from typing import Any

from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND, JobPhase
from aiperf.kubeapi import (
    ApiError,
    KubeApi,
    KubeClusterError,
    KubeError,
    Obj,
    Resource,
    fenced,
    uid_of,
    watch_object,
)
from aiperf.kuberun.direct import creation_error

CR_API_VERSION = f"{API_GROUP}/{API_VERSION}"
PLURAL = "aiperfjobs"
JOBS = Resource(CR_API_VERSION, JOB_KIND, PLURAL)
TERMINAL_PHASES = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.CANCELLED})


class CancelOutcome(StrEnum):
    """What `cancel_job` did."""

    REQUESTED = "requested"  # spec.cancel set now; the operator stops the run
    ALREADY = "already"  # spec.cancel was already true
    FINISHED = "finished"  # the run had already ended: nothing changed


def phase_of(job: Mapping[str, Any]) -> JobPhase | None:
    """`status.phase` of an AIPerfJob (None until the operator has written one)."""
    value = (job.get("status") or {}).get("phase")
    try:
        return JobPhase(value) if value else None
    except ValueError:
        return None


async def operator_installed(api: KubeApi) -> bool:
    """True when the API server serves AIPerfJobs (its CRD is installed), from API discovery
    (`GET /apis/aiperf.nvidia.com/v1alpha1`), which every authenticated user may read."""
    try:
        answer: Obj = await api.request("GET", f"/apis/{CR_API_VERSION}")
    except ApiError as exc:
        if exc.not_found:
            return False
        raise KubeClusterError(f"probing for the AIPerfJob CRD failed: {exc.describe()}; "
                               "pass --operator or --no-operator to skip the probe") from None
    return any(r.get("name") == PLURAL for r in answer.get("resources") or [])


async def create_job(api: KubeApi, job: Mapping[str, Any]) -> Obj:
    """Create the AIPerfJob `job` (metadata.name and namespace set); the stored object. KubeError
    when one of that name exists or the namespace does not; the API server's refusal of an invalid
    CR comes back as one line with its reason."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    try:
        return await api.create(job)
    except ApiError as exc:
        if exc.status == 422:
            raise KubeError(f"the API server refused AIPerfJob {name}: {exc.message}") from None
        raise creation_error(exc, JOB_KIND, name, namespace, f"run `aiperf kube delete {name} -n {namespace}` "
                             "first (or choose another --name)") from None


async def get_job(api: KubeApi, name: str, namespace: str) -> Obj | None:
    """The AIPerfJob `name`, or None when there is none (or the CRD is not installed)."""
    try:
        return await api.get(JOBS, namespace, name)
    except ApiError as exc:
        raise KubeClusterError(f"reading AIPerfJob {namespace}/{name} failed: {exc.describe()}") from None


async def cancel_job(api: KubeApi, job: Mapping[str, Any]) -> CancelOutcome:
    """Set `spec.cancel: true` on the AIPerfJob read as `job` (the operator then stops its JobSet),
    fenced on its UID. KubeClusterError when the CR was deleted or replaced meanwhile, or the
    patch was refused."""
    meta = job["metadata"]
    if phase_of(job) in TERMINAL_PHASES:
        return CancelOutcome.FINISHED
    if (job.get("spec") or {}).get("cancel") is True:
        return CancelOutcome.ALREADY
    try:
        await api.patch(JOBS, meta["namespace"], meta["name"],
                        fenced(uid_of(job), {"op": "add", "path": "/spec/cancel", "value": True}))
    except ApiError as exc:
        if exc.not_found or exc.lost_race:
            raise KubeClusterError(f"AIPerfJob {meta['name']} was deleted or replaced while cancelling; "
                                   "check `aiperf kube list`") from None
        raise KubeClusterError(f"cancelling AIPerfJob {meta['name']} failed: {exc.describe()}") from None
    return CancelOutcome.REQUESTED


async def delete_job(api: KubeApi, job: Mapping[str, Any]) -> bool:
    """Delete the AIPerfJob read as `job`, with its UID as a precondition (a same-name replacement
    is never deleted) and Background propagation: garbage collection removes what it owns. True
    when deleted (or already being deleted), False when it is gone or was replaced meanwhile."""
    meta = job["metadata"]
    try:
        return await api.delete(JOBS, meta["namespace"], meta["name"], uid=uid_of(job))
    except ApiError as exc:
        if exc.lost_race:
            return False
        raise KubeClusterError(f"deleting AIPerfJob {meta['name']} failed: {exc.describe()}") from None


async def watch_job_until_done(api: KubeApi, name: str, namespace: str,
                               on_event: Callable[[Obj], None] | None = None, *,
                               watch_timeout_s: int = 300) -> JobPhase:
    """Block until AIPerfJob `name` reaches Completed, Failed or Cancelled and return it;
    `on_event(job)` sees the first read and every change. Reads, then watches (read again after
    any watch error). KubeError when the CR is missing, `Gone` when it is deleted or replaced by
    a same-name one. Wrap in `anyio.fail_after` for a deadline."""
    job = await get_job(api, name, namespace)
    if job is None:
        raise KubeError(f"no AIPerfJob {name} in namespace {namespace}")
    versions = watch_object(api, JOBS, namespace, job, what=f"AIPerfJob {name}", watch_timeout_s=watch_timeout_s)
    async with aclosing(versions):
        async for version in versions:
            if on_event is not None:
                on_event(version)
            if (phase := phase_of(version)) in TERMINAL_PHASES:
                assert phase is not None
                return phase
    raise AssertionError("a watch ends only by an error")  # pragma: no cover


__all__ = ["CR_API_VERSION", "JOBS", "PLURAL", "TERMINAL_PHASES", "CancelOutcome", "cancel_job", "create_job",
           "delete_job", "get_job", "operator_installed", "phase_of", "watch_job_until_done"]
