"""Direct-mode runs: the objects `aiperf kube profile` creates with the user's own credentials,
read, cancelled, watched and deleted through `aiperf.kubeapi`.

Every function takes a `KubeApi` and a run `name` (the user's name; the objects are named by
`aiperf.kube.names`). Failures the user can act on raise `KubeError` with one line naming the
problem and the fix; failures of the cluster itself (unreachable, an API error, a JobSet that
vanished) raise its subclass `KubeClusterError`.

Cancel in direct mode suspends the JobSet (`spec.suspend: true`): the JobSet controller stops the
run's pods, the JobSet stays as the record of the run (state Suspended), and `delete` removes it
with the rest. This mirrors operator mode, where `cancel` sets `spec.cancel` on the AIPerfJob and
the operator stops the JobSet while the CR remains. The patch is fenced on `metadata.uid`, so a
cancel never suspends a same-name JobSet that replaced the one it read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import anyio

from aiperf.kube.names import (
    CONTROLLER_JOB,
    JOBSET_NAME_LABEL,
    PREFIX,
    REPLICATED_JOB_LABEL,
    config_map_name,
    curve_secret_name,
    jobset_name,
)
from aiperf.kube.settings import INSTANCE_LABEL, NAME_LABEL
from aiperf.kubeapi import (
    CONFIG_MAPS,
    JOBSETS,
    NAMESPACES,
    PODS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    ApiError,
    KubeApi,
    KubeClusterError,
    KubeError,
    Obj,
    fenced,
    resource_of,
    uid_of,
    watch_object,
)

APP_LABEL, APP_LABEL_VALUE = NAME_LABEL, "aiperf"
"""The label every aiperf JobSet carries (direct mode and the operator's)."""
RUN_SELECTOR = f"{APP_LABEL}={APP_LABEL_VALUE}"
_CREATE_RANK = {"ServiceAccount": 0, "Role": 0, "RoleBinding": 1, "JobSet": 3}  # anything else: 2
_RUN_OBJECTS = ((JOBSETS, jobset_name), (CONFIG_MAPS, config_map_name), (SECRETS, curve_secret_name),
                (ROLE_BINDINGS, jobset_name), (ROLES, jobset_name), (SERVICE_ACCOUNTS, jobset_name))
"""What `delete` removes of a run, in order: (resource, name of the run's object)."""


class JobState(StrEnum):
    """A run's state as its JobSet reports it."""

    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


TERMINAL = frozenset({JobState.COMPLETED, JobState.FAILED})


class RunReplaced(KubeClusterError):
    """A run's object was replaced by a same-name one (a newer run) since it was read: left alone."""


@dataclass(frozen=True, kw_only=True)
class JobSummary:
    """One aiperf run as its JobSet stands for it (a line of `aiperf kube list`)."""

    name: str
    namespace: str
    jobset: str
    state: JobState
    created: str | None
    uid: str


def run_name(jobset: Mapping[str, Any]) -> str:
    """The run name: the `app.kubernetes.io/instance` label, else the JobSet name less `aiperf-`."""
    meta = jobset.get("metadata") or {}
    instance = (meta.get("labels") or {}).get(INSTANCE_LABEL)
    return str(instance or meta.get("name", "").removeprefix(f"{PREFIX}-"))


def jobset_state(jobset: Mapping[str, Any]) -> JobState:
    """The run state from a JobSet: Failed or Completed when that condition is True (or
    `status.terminalState` says so), Suspended when suspended, else Running."""
    status = jobset.get("status") or {}
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    terminal = status.get("terminalState")
    if "Failed" in true or terminal == "Failed":
        return JobState.FAILED
    if "Completed" in true or terminal == "Completed":
        return JobState.COMPLETED
    if "Suspended" in true or (jobset.get("spec") or {}).get("suspend") is True:
        return JobState.SUSPENDED
    return JobState.RUNNING


def summarize(jobset: Mapping[str, Any]) -> JobSummary:
    """The run a JobSet stands for (name, namespace, state, creation time, uid)."""
    meta = jobset["metadata"]
    return JobSummary(name=run_name(jobset), namespace=meta.get("namespace", ""), jobset=meta["name"],
                      state=jobset_state(jobset), created=meta.get("creationTimestamp"), uid=meta.get("uid", ""))


def no_run(name: str, namespace: str) -> KubeError:
    """The error for a run that does not exist."""
    return KubeError(f"no run {name} in namespace {namespace} (JobSet {jobset_name(name)} not found)")


async def ensure_namespace_exists(api: KubeApi, namespace: str) -> None:
    """Return when `namespace` exists; KubeError when it does not (it is never created here).

    A user allowed into one namespace may not read namespace objects: 403 is taken as "cannot
    tell" and passes (creating objects there then fails with a clear error of its own).
    """
    try:
        await api.request("GET", NAMESPACES.path(None, namespace))
    except ApiError as exc:
        if exc.not_found:
            raise KubeError(f"namespace {namespace} does not exist; create it first "
                            "(it is never created for you)") from None
        if exc.status != 403:
            raise KubeClusterError(f"checking namespace {namespace} failed: {exc.describe()}") from None


def creation_error(exc: ApiError, kind: str, name: str, namespace: str, fix: str) -> KubeError:
    """The one line for a create the server refused: AlreadyExists names `fix`, a missing
    namespace says so, anything else is the cluster's failure."""
    if exc.status == 409 and exc.reason == "AlreadyExists":
        return KubeError(f"{kind} {name} already exists in namespace {namespace}; {fix}")
    if exc.not_found and f'namespaces "{namespace}"' in exc.message:
        return KubeError(f"namespace {namespace} does not exist; create it first (it is never created for you)")
    return KubeClusterError(f"creating {kind} {namespace}/{name} failed: {exc.describe()}")


async def create_all(api: KubeApi, objects: Sequence[Obj]) -> list[Obj]:
    """Create `objects` (each with apiVersion, kind, metadata.name and metadata.namespace) in
    dependency order: ServiceAccount and Role, RoleBinding, then ConfigMap and the rest, JobSet
    last (its pods need the others). Returns the created objects as the server stored them.

    All or nothing: when one create fails, the objects this call created are deleted again and
    KubeError says why (AlreadyExists names the `aiperf kube delete` to run first).
    """
    ordered = sorted(objects, key=lambda o: _CREATE_RANK.get(o.get("kind", ""), 2))
    jobsets = [o for o in objects if o.get("kind") == "JobSet"]
    run = run_name(jobsets[0]) if jobsets else None
    created: list[Obj] = []
    try:
        for obj in ordered:
            meta = obj.get("metadata") or {}
            kind, name, namespace = obj.get("kind", ""), meta.get("name", ""), meta.get("namespace")
            if not (obj.get("apiVersion") and kind and name and namespace):
                raise ValueError(f"create_all needs apiVersion, kind, metadata.name and metadata.namespace: "
                                 f"{kind or '?'} {name or '?'}")
            try:
                created.append(await api.create(obj))
            except ApiError as exc:
                fix = f"run `aiperf kube delete {run} -n {namespace}` first" if run else "delete it first"
                raise creation_error(exc, kind, name, namespace, f"{fix} (or choose another --name)") from None
    except BaseException:
        with anyio.CancelScope(shield=True):
            for obj in reversed(created):
                await _delete_quietly(api, obj)
        raise
    return created


async def _delete_quietly(api: KubeApi, obj: Obj) -> None:
    """Best-effort rollback of one object this process created, fenced on its uid."""
    meta = obj["metadata"]
    try:
        await api.delete(resource_of(obj), meta["namespace"], meta["name"], uid=meta["uid"])
    except KubeError:
        pass


async def get_jobset(api: KubeApi, name: str, namespace: str) -> Obj | None:
    """The JobSet of run `name`, or None when there is none."""
    try:
        return await api.get(JOBSETS, namespace, jobset_name(name))
    except ApiError as exc:
        raise KubeClusterError(f"reading JobSet {jobset_name(name)} failed: {exc.describe()}") from None


async def watch_jobset_until_done(api: KubeApi, name: str, namespace: str,
                                  on_event: Callable[[JobState, Obj], None] | None = None, *,
                                  stop_on_suspended: bool = True, watch_timeout_s: int = 300) -> JobState:
    """Block until run `name`'s JobSet is Completed or Failed (or Suspended, i.e. cancelled,
    unless `stop_on_suspended` is False, e.g. under a queue that suspends on admission), and
    return that state. `on_event(state, jobset)` is called with the first read and every change.

    Reads the JobSet, then watches it (`aiperf.kubeapi.watch_object`: read again after any
    watch error). KubeError when the JobSet is missing; `Gone` (a KubeClusterError) when it is
    deleted or replaced by another one with the same name. Wrap in `anyio.fail_after` for a
    deadline.
    """
    done = TERMINAL | ({JobState.SUSPENDED} if stop_on_suspended else set())
    jobset = await get_jobset(api, name, namespace)
    if jobset is None:
        raise no_run(name, namespace)
    versions = watch_object(api, JOBSETS, namespace, jobset, what=f"JobSet {jobset_name(name)}",
                            watch_timeout_s=watch_timeout_s)
    async with aclosing(versions):
        async for version in versions:
            state = jobset_state(version)
            if on_event is not None:
                on_event(state, version)
            if state in done:
                return state
    raise AssertionError("a watch ends only by an error")  # pragma: no cover


async def cancel(api: KubeApi, name: str, namespace: str) -> JobState:
    """Cancel run `name`: suspend its JobSet (its pods stop; the JobSet stays until `delete`).

    Returns the state after the call: Suspended, or the run's terminal state when it had already
    finished (nothing is changed then). The JSON Patch tests `metadata.uid` first; KubeError when
    the run does not exist or its JobSet was replaced or deleted meanwhile.
    """
    jobset = await get_jobset(api, name, namespace)
    if jobset is None:
        raise no_run(name, namespace)
    state = jobset_state(jobset)
    if state != JobState.RUNNING:
        return state
    try:
        await api.patch(JOBSETS, namespace, jobset_name(name),
                        fenced(uid_of(jobset), {"op": "add", "path": "/spec/suspend", "value": True}))
    except ApiError as exc:
        if exc.status in (404, 422):
            raise KubeClusterError(f"JobSet {jobset_name(name)} was deleted or replaced while cancelling; "
                                   "check `aiperf kube list`") from None
        raise KubeClusterError(f"cancelling run {name} failed: {exc.describe()}") from None
    return JobState.SUSPENDED


async def delete(api: KubeApi, name: str, namespace: str, *, uid: str | None = None) -> list[str]:
    """Delete run `name`'s JobSet (its pods and service go with it), ConfigMap, CURVE key
    Secret, RoleBinding, Role and own ServiceAccount, with propagationPolicy Foreground. Objects
    already gone are skipped. Returns what was deleted, as `kind/name`; an empty list means
    nothing of the run was there.

    Every delete is fenced on the UID read just before: an object replaced by a same-name one
    meanwhile is left alone (RunReplaced, a KubeClusterError). With `uid` (the JobSet's, as `kube
    list` shows it) nothing is deleted unless the run's JobSet is that incarnation."""
    if uid is not None:
        jobset = await get_jobset(api, name, namespace)
        if jobset is not None and uid_of(jobset) != uid:
            raise RunReplaced(f"run {name} is now JobSet uid {uid_of(jobset)}, not {uid}: "
                              "a new run with the same name; nothing deleted")
    deleted: list[str] = []
    for resource, named in _RUN_OBJECTS:
        object_name = named(name)
        try:
            current = await api.get(resource, namespace, object_name)
            if current is None:
                continue
            # The JobSet is fenced on the given uid itself: one replaced since the check is kept.
            fence = uid if resource is JOBSETS and uid is not None else uid_of(current)
            if not await api.delete(resource, namespace, object_name, uid=fence, propagation="Foreground"):
                continue
        except ApiError as exc:
            if exc.status == 409:
                raise RunReplaced(f"{resource.kind} {namespace}/{object_name} was replaced by a same-name one "
                                  "while deleting; left alone") from None
            raise KubeClusterError(f"deleting {resource.kind} {namespace}/{object_name} failed: "
                                   f"{exc.describe()}") from None
        deleted.append(f"{resource.kind}/{object_name}")
    return deleted


async def list_pods(api: KubeApi, name: str, namespace: str, *, replicated_job: str | None = None) -> list[Obj]:
    """The pods of run `name` (of one replicated job, e.g. `controller`, when given), by the
    labels JobSet puts on them; oldest first."""
    selector = f"{JOBSET_NAME_LABEL}={jobset_name(name)}"
    if replicated_job is not None:
        selector += f",{REPLICATED_JOB_LABEL}={replicated_job}"
    try:
        pods = (await api.list_all(PODS, namespace, label_selector=selector)).items
    except ApiError as exc:
        raise KubeClusterError(f"listing pods of run {name} failed: {exc.describe()}") from None
    return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))


async def list_events(api: KubeApi, namespace: str) -> list[Obj]:
    """The Events of `namespace`, oldest first (`KubeApi.events`); KubeClusterError when they
    cannot be listed."""
    try:
        return await api.events(namespace)
    except ApiError as exc:
        raise KubeClusterError(f"listing the events of namespace {namespace} failed: {exc.describe()}") from None


def running_pod(pods: Sequence[Obj]) -> Obj | None:
    """The newest Running pod of `pods` (oldest first), None when none runs."""
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return running[-1] if running else None


async def controller_pod(api: KubeApi, name: str, namespace: str) -> str:
    """The name of run `name`'s controller pod (a Running one first, then the newest).
    KubeError when there is none."""
    pods = await list_pods(api, name, namespace, replicated_job=CONTROLLER_JOB)
    if not pods:
        raise KubeError(f"no controller pod for run {name} in namespace {namespace}; it is gone once the "
                        "run is cancelled or deleted, or its JobSet's TTL expired")
    return str((running_pod(pods) or pods[-1])["metadata"]["name"])


async def pod_logs(api: KubeApi, pod: str, namespace: str, *, container: str | None = None,
                   tail: int | None = None) -> str:
    """The log of `container` of `pod` (None: its only container), the last `tail` lines when
    given. KubeError when the pod is missing or the container must be named."""
    try:
        return await api.log(namespace, pod, container=container, tail=tail)
    except ApiError as exc:
        if exc.not_found:
            raise KubeError(f"pod {pod} not found in namespace {namespace}") from None
        raise KubeError(f"reading the log of pod {pod} failed: {exc.message}") from None


__all__ = ["APP_LABEL", "APP_LABEL_VALUE", "RUN_SELECTOR", "TERMINAL", "JobState", "JobSummary", "RunReplaced",
           "cancel", "controller_pod", "create_all", "creation_error", "delete", "ensure_namespace_exists",
           "get_jobset", "jobset_state", "list_events", "list_pods", "no_run", "pod_logs", "run_name", "running_pod",
           "summarize", "watch_jobset_until_done"]
