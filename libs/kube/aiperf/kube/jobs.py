"""Operator-mode operations on a cluster: AIPerfJob custom resources (kubernetes_asyncio, no kubectl).

Like `aiperf.kube.ops`: every function takes an `ApiClient`, raises `KubeError` with one line
for what the user can fix and `KubeClusterError` for a failure of the cluster. An AIPerfJob's
`status.phase` is written by the operator; these functions only create the CR, read it, set
`spec.cancel` (a JSON Patch that tests the UID first, so a same-name replacement is never
cancelled by mistake), delete it (UID precondition) and watch it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import aclosing
from enum import StrEnum
from typing import Any

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.kube.client import KubeClusterError, KubeError, api_status
from aiperf.kube.crd_model import API_GROUP, API_VERSION, JobPhase
from aiperf.kube.ops import JSON_PATCH, _call, _describe, _error_of, _events, _open, _path

Obj = dict[str, Any]
CR_API_VERSION = f"{API_GROUP}/{API_VERSION}"
PLURAL = "aiperfjobs"
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


async def operator_installed(api: ApiClient) -> bool:
    """True when the API server serves AIPerfJobs (its CRD is installed), from API discovery
    (`GET /apis/aiperf.nvidia.com/v1alpha1`), which every authenticated user may read."""
    try:
        answer: Obj = await _call(api, "GET", f"/apis/{CR_API_VERSION}")
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise KubeClusterError(f"probing for the AIPerfJob CRD failed: {_describe(exc)}; "
                               "pass --operator or --no-operator to skip the probe") from None
    return any(r.get("name") == PLURAL for r in answer.get("resources") or [])


async def create_job(api: ApiClient, job: Mapping[str, Any]) -> Obj:
    """Create the AIPerfJob `job` (metadata.name and namespace set); the stored object. KubeError
    when one of that name exists or the namespace does not; the API server's refusal of an invalid
    CR comes back as one line with its reason."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    try:
        created: Obj = await _call(api, "POST", _path(CR_API_VERSION, PLURAL, namespace), body=dict(job))
    except ApiException as exc:
        code, reason, message = api_status(exc)
        if code == 409 and reason == "AlreadyExists":
            raise KubeError(f"AIPerfJob {name} already exists in namespace {namespace}; run "
                            f"`aiperf kube delete {name} -n {namespace}` first (or choose another --name)") from None
        if code == 404 and f'namespaces "{namespace}"' in message:
            raise KubeError(f"namespace {namespace} does not exist; create it first "
                            "(it is never created for you)") from None
        if code == 422:
            raise KubeError(f"the API server refused AIPerfJob {name}: {message}") from None
        raise KubeClusterError(f"creating AIPerfJob {namespace}/{name} failed: {_describe(exc)}") from None
    return created


async def get_job(api: ApiClient, name: str, namespace: str) -> Obj | None:
    """The AIPerfJob `name`, or None when there is none (or the CRD is not installed)."""
    try:
        job: Obj = await _call(api, "GET", _path(CR_API_VERSION, PLURAL, namespace, name))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise KubeClusterError(f"reading AIPerfJob {namespace}/{name} failed: {_describe(exc)}") from None
    return job


async def cancel_job(api: ApiClient, job: Mapping[str, Any]) -> CancelOutcome:
    """Set `spec.cancel: true` on the AIPerfJob read as `job` (the operator then stops its JobSet).
    The JSON Patch tests `metadata.uid` first. KubeClusterError when the CR was deleted or
    replaced meanwhile, or the patch was refused."""
    meta = job["metadata"]
    if phase_of(job) in TERMINAL_PHASES:
        return CancelOutcome.FINISHED
    if (job.get("spec") or {}).get("cancel") is True:
        return CancelOutcome.ALREADY
    patch = [{"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
             {"op": "add", "path": "/spec/cancel", "value": True}]
    try:
        await _call(api, "PATCH", _path(CR_API_VERSION, PLURAL, meta["namespace"], meta["name"]), body=patch,
                    content_type=JSON_PATCH)
    except ApiException as exc:
        if exc.status == 404 or (exc.status == 422 and "test" in api_status(exc)[2]):
            raise KubeClusterError(f"AIPerfJob {meta['name']} was deleted or replaced while cancelling; "
                                   "check `aiperf kube list`") from None
        raise KubeClusterError(f"cancelling AIPerfJob {meta['name']} failed: {_describe(exc)}") from None
    return CancelOutcome.REQUESTED


async def delete_job(api: ApiClient, job: Mapping[str, Any]) -> bool:
    """Delete the AIPerfJob read as `job`, with its UID as a precondition (a same-name replacement
    is never deleted) and Background propagation: garbage collection removes what it owns. True
    when deleted (or already being deleted), False when it is gone or was replaced meanwhile."""
    meta = job["metadata"]
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
            "preconditions": {"uid": meta["uid"]}}
    try:
        await _call(api, "DELETE", _path(CR_API_VERSION, PLURAL, meta["namespace"], meta["name"]), body=body)
    except ApiException as exc:
        if exc.status in (404, 409):
            return False
        raise KubeClusterError(f"deleting AIPerfJob {meta['name']} failed: {_describe(exc)}") from None
    return True


async def watch_job_until_done(api: ApiClient, name: str, namespace: str,
                               on_event: Callable[[Obj], None] | None = None, *,
                               watch_timeout_s: int = 300) -> JobPhase:
    """Block until AIPerfJob `name` reaches Completed, Failed or Cancelled and return it;
    `on_event(job)` sees the first read and every change. Reads, then watches from that
    resourceVersion (again after each server timeout or 410 Expired). KubeError when the CR is
    missing, deleted or replaced by a same-name one. Wrap in `anyio.fail_after` for a deadline."""
    job = await get_job(api, name, namespace)
    if job is None:
        raise KubeError(f"no AIPerfJob {name} in namespace {namespace}")
    uid = job["metadata"]["uid"]
    while True:
        if on_event is not None:
            on_event(job)
        if (phase := phase_of(job)) in TERMINAL_PHASES:
            assert phase is not None
            return phase
        rv = job["metadata"]["resourceVersion"]
        query = {"watch": "true", "fieldSelector": f"metadata.name={name}", "resourceVersion": rv,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(watch_timeout_s)}
        response = await _open(api, _path(CR_API_VERSION, PLURAL, namespace), query)
        try:
            if response.status != 200:
                raise KubeClusterError(f"watching AIPerfJob {name} failed: {_describe(await _error_of(response))}")
            async with aclosing(_events(response)) as events:
                async for event in events:
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") != 410:
                            raise KubeClusterError(f"watching AIPerfJob {name} failed: {obj.get('message')}")
                        break
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED" or obj.get("metadata", {}).get("uid") != uid:
                        raise KubeClusterError(f"AIPerfJob {name} was deleted or replaced before it finished")
                    if on_event is not None:
                        on_event(obj)
                    if (phase := phase_of(obj)) in TERMINAL_PHASES:
                        assert phase is not None
                        return phase
        finally:
            response.release()
        fresh = await get_job(api, name, namespace)
        if fresh is None or fresh["metadata"]["uid"] != uid:
            raise KubeClusterError(f"AIPerfJob {name} was deleted or replaced before it finished")
        job = fresh


__all__ = ["CR_API_VERSION", "PLURAL", "TERMINAL_PHASES", "CancelOutcome", "cancel_job", "create_job", "delete_job",
           "get_job",
           "operator_installed", "phase_of", "watch_job_until_done"]
