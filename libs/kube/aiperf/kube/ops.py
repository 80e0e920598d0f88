"""Direct-mode operations on a cluster through kubernetes_asyncio (never kubectl).

Every function takes an `ApiClient` from `aiperf.kube.client.load_client` and a run `name`
(the user's name; the objects are named by `aiperf.kube.names`). Failures the user can act on
raise `KubeError` with one line naming the problem and the fix; failures of the cluster itself
(unreachable, an API error, a JobSet that vanished) raise its subclass `KubeClusterError`.

Cancel in direct mode suspends the JobSet (`spec.suspend: true`): the JobSet controller stops the
run's pods, the JobSet stays as the record of the run (state Suspended in `list_jobs`), and
`delete` removes it with the rest. This mirrors operator mode, where `cancel` sets `spec.cancel`
on the AIPerfJob and the operator stops the JobSet while the CR remains. The patch is a JSON
Patch whose first op tests `metadata.uid`, so a cancel never suspends a same-name JobSet that
replaced the one it read.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.kube.client import KubeClusterError, KubeError, api_status
from aiperf.kube.containers import API_PORT
from aiperf.kube.names import CONTROLLER_JOB, PREFIX, config_map_name, curve_secret_name, jobset_name
from aiperf.kube.settings import INSTANCE_LABEL, NAME_LABEL

Obj = dict[str, Any]

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSETS = "jobsets"
APP_LABEL = NAME_LABEL
APP_LABEL_VALUE = "aiperf"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
_PLURALS = {"Role": "roles", "RoleBinding": "rolebindings", "ConfigMap": "configmaps", "Secret": "secrets",
            "Service": "services", "ServiceAccount": "serviceaccounts", "JobSet": JOBSETS, "Pod": "pods",
            "Namespace": "namespaces"}
_CREATE_RANK = {"ServiceAccount": 0, "Role": 0, "RoleBinding": 1, "JobSet": 3}  # anything else: 2


class JobState(StrEnum):
    """A run's state as its JobSet reports it."""

    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


TERMINAL = frozenset({JobState.COMPLETED, JobState.FAILED})


@dataclass(frozen=True, kw_only=True)
class JobSummary:
    """One aiperf run found in the cluster (a line of `aiperf kube list`)."""

    name: str
    namespace: str
    jobset: str
    state: JobState
    created: str | None
    uid: str


# -- plumbing ----------------------------------------------------------------------------------

def _path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None,
          *rest: str) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace is not None:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(quote(name, safe=":"))
    parts += [quote(r, safe="") for r in rest]
    return "/".join(parts)


async def _call(api: ApiClient, method: str, path: str, *, body: Any = None,
                query: Mapping[str, str] | None = None, content_type: str = JSON) -> Any:
    """One request; the decoded JSON answer. Raises ApiException on an error status and
    KubeError when the server cannot be reached."""
    try:
        return await api.call_api(path, method, query_params=list((query or {}).items()),
                                  header_params={"Accept": JSON, "Content-Type": content_type}, body=body,
                                  auth_settings=["BearerToken"], _return_http_data_only=True,
                                  response_types_map={200: "object", 201: "object", 202: "object"})
    except aiohttp.ClientError as exc:
        raise _unreachable(api, exc) from None


async def _open(api: ApiClient, path: str, query: Mapping[str, str] | None = None) -> aiohttp.ClientResponse:
    """GET `path` and return the unread response (any status); the caller releases it."""
    try:
        response: aiohttp.ClientResponse = await api.call_api(
            path, "GET", query_params=list((query or {}).items()), header_params={"Accept": "*/*"},
            auth_settings=["BearerToken"], _return_http_data_only=True, _preload_content=False)
    except aiohttp.ClientError as exc:
        raise _unreachable(api, exc) from None
    return response


async def _error_of(response: aiohttp.ClientResponse) -> ApiException:
    """An ApiException carrying a failed raw response's status and body."""
    exc = ApiException(status=response.status, reason=response.reason)
    exc.body = await response.read()
    return exc


def _unreachable(api: ApiClient, exc: BaseException) -> KubeClusterError:
    return KubeClusterError(f"cannot reach the Kubernetes API server at {api.configuration.host}: {exc}; "
                     "check --kubeconfig/--kube-context")


def _describe(exc: ApiException) -> str:
    code, reason, message = api_status(exc)
    return f"{code} {reason}: {message}"


class RunReplaced(KubeClusterError):
    """A run's object was replaced by a same-name one (a newer run) since it was read: left alone."""


def _plural(kind: str) -> str:
    return _PLURALS.get(kind, kind.lower() + "s")


def _run_name(jobset: Obj) -> str:
    """The run name: the `app.kubernetes.io/instance` label, else the JobSet name less `aiperf-`."""
    meta = jobset.get("metadata") or {}
    instance = (meta.get("labels") or {}).get(INSTANCE_LABEL)
    return str(instance or meta.get("name", "").removeprefix(f"{PREFIX}-"))


def leaving(live: Mapping[str, Any] | None, uid: str) -> bool:
    """The object read as `live` (None: not found) is gone, replaced (another UID) or being
    deleted (deletionTimestamp set, its finalizers not yet released): no longer the live one of
    `uid`."""
    return live is None or live["metadata"]["uid"] != uid or bool(live["metadata"].get("deletionTimestamp"))


def jobset_state(jobset: Obj) -> JobState:
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


# -- operations --------------------------------------------------------------------------------

async def ensure_namespace_exists(api: ApiClient, namespace: str) -> None:
    """Return when `namespace` exists; KubeError when it does not (it is never created here).

    A user allowed into one namespace may not read namespace objects: 403 is taken as "cannot
    tell" and passes (creating objects there then fails with a clear error of its own).
    """
    try:
        await _call(api, "GET", _path("v1", "namespaces", None, namespace))
    except ApiException as exc:
        if exc.status == 404:
            raise KubeError(f"namespace {namespace} does not exist; create it first "
                            "(it is never created for you)") from None
        if exc.status != 403:
            raise KubeClusterError(f"checking namespace {namespace} failed: {_describe(exc)}") from None


async def create_all(api: ApiClient, objects: Sequence[Obj]) -> list[Obj]:
    """Create `objects` (each with apiVersion, kind, metadata.name and metadata.namespace) in
    dependency order: ServiceAccount and Role, RoleBinding, then ConfigMap and the rest, JobSet
    last (its pods need the others). Returns the created objects as the server stored them.

    All or nothing: when one create fails, the objects this call created are deleted again and
    KubeError says why (AlreadyExists names the `aiperf kube delete` to run first).
    """
    ordered = sorted(objects, key=lambda o: _CREATE_RANK.get(o.get("kind", ""), 2))
    jobsets = [o for o in objects if o.get("kind") == "JobSet"]
    run = _run_name(jobsets[0]) if jobsets else None
    created: list[Obj] = []
    try:
        for obj in ordered:
            meta = obj.get("metadata") or {}
            kind, name, namespace = obj.get("kind", ""), meta.get("name", ""), meta.get("namespace")
            if not (obj.get("apiVersion") and kind and name and namespace):
                raise ValueError(f"create_all needs apiVersion, kind, metadata.name and metadata.namespace: "
                                 f"{kind or '?'} {name or '?'}")
            try:
                created.append(await _call(api, "POST", _path(obj["apiVersion"], _plural(kind), namespace),
                                           body=obj))
            except ApiException as exc:
                code, reason, _ = api_status(exc)
                if code == 409 and reason == "AlreadyExists":
                    fix = f"run `aiperf kube delete {run} -n {namespace}` first" if run else "delete it first"
                    raise KubeError(f"{kind} {name} already exists in namespace {namespace}; {fix} "
                                    "(or choose another --name)") from None
                if code == 404 and f'namespaces "{namespace}"' in api_status(exc)[2]:
                    raise KubeError(f"namespace {namespace} does not exist; create it first "
                                    "(it is never created for you)") from None
                raise KubeClusterError(f"creating {kind} {namespace}/{name} failed: "
                                       f"{_describe(exc)}") from None
    except BaseException:
        with anyio.CancelScope(shield=True):
            for obj in reversed(created):
                await _delete_quietly(api, obj)
        raise
    return created


async def _delete_quietly(api: ApiClient, obj: Obj) -> None:
    """Best-effort rollback of one object this process created, fenced on its uid."""
    meta = obj["metadata"]
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
            "preconditions": {"uid": meta["uid"]}}
    try:
        await _call(api, "DELETE", _path(obj["apiVersion"], _plural(obj["kind"]), meta["namespace"],
                                         meta["name"]), body=body)
    except (ApiException, KubeError):
        pass


async def get_jobset(api: ApiClient, name: str, namespace: str) -> Obj | None:
    """The JobSet of run `name`, or None when there is none."""
    try:
        obj: Obj = await _call(api, "GET", _path(JOBSET_API_VERSION, JOBSETS, namespace, jobset_name(name)))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise KubeClusterError(f"reading JobSet {jobset_name(name)} failed: {_describe(exc)}") from None
    return obj


async def list_jobs(api: ApiClient, namespace: str | None) -> list[JobSummary]:
    """The aiperf runs (JobSets labelled `app.kubernetes.io/name=aiperf`) in `namespace`, or in
    every namespace when None; oldest first."""
    query = {"labelSelector": f"{APP_LABEL}={APP_LABEL_VALUE}"}
    try:
        answer: Obj = await _call(api, "GET", _path(JOBSET_API_VERSION, JOBSETS, namespace), query=query)
    except ApiException as exc:
        if exc.status == 404:
            raise KubeClusterError("the JobSet API (jobset.x-k8s.io) is not installed in this cluster; "
                            "install JobSet first") from None
        raise KubeClusterError(f"listing JobSets failed: {_describe(exc)}") from None
    summaries = [summarize(js) for js in answer.get("items") or []]
    return sorted(summaries, key=lambda s: (s.created or "", s.namespace, s.name))


def summarize(jobset: Obj) -> JobSummary:
    """The run a JobSet stands for (name, namespace, state, creation time, uid)."""
    meta = jobset["metadata"]
    return JobSummary(name=_run_name(jobset), namespace=meta.get("namespace", ""), jobset=meta["name"],
                      state=jobset_state(jobset), created=meta.get("creationTimestamp"), uid=meta.get("uid", ""))


async def watch_jobset_until_done(api: ApiClient, name: str, namespace: str,
                                  on_event: Callable[[JobState, Obj], None] | None = None, *,
                                  stop_on_suspended: bool = True, watch_timeout_s: int = 300) -> JobState:
    """Block until run `name`'s JobSet is Completed or Failed (or Suspended, i.e. cancelled,
    unless `stop_on_suspended` is False, e.g. under a queue that suspends on admission), and
    return that state. `on_event(state, jobset)` is called with the first read and every change.

    Reads the JobSet, then watches it from that resourceVersion (reconnecting every
    `watch_timeout_s` and after 410 Expired, by reading it again). KubeError when the JobSet is
    missing, deleted, or replaced by another one with the same name. Wrap in `anyio.fail_after`
    for a deadline.
    """
    done = TERMINAL | ({JobState.SUSPENDED} if stop_on_suspended else set())
    jobset = await get_jobset(api, name, namespace)
    if jobset is None:
        raise KubeError(f"no run {name} in namespace {namespace} (JobSet {jobset_name(name)} not found)")
    uid, broken = jobset["metadata"]["uid"], 0
    while True:
        state = jobset_state(jobset)
        if on_event is not None:
            on_event(state, jobset)
        if state in done:
            return state
        rv = jobset["metadata"]["resourceVersion"]
        expired = False
        while not expired:  # one watch per turn; the server ends each after watch_timeout_s
            query = {"watch": "true", "fieldSelector": f"metadata.name={jobset_name(name)}",
                     "resourceVersion": rv, "allowWatchBookmarks": "true",
                     "timeoutSeconds": str(watch_timeout_s)}
            try:
                response = await _open(api, _path(JOBSET_API_VERSION, JOBSETS, namespace), query)
            except (aiohttp.ClientError, TimeoutError) as exc:
                broken = _count_broken(broken, exc)
                break  # the API server unreachable for a moment: read the JobSet again
            try:
                if response.status != 200:
                    raise KubeClusterError(f"watching JobSet {jobset_name(name)} failed: "
                                    f"{_describe(await _error_of(response))}")
                async with aclosing(_events(response)) as events:
                    async for event in events:
                        broken = 0
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") != 410:
                                raise KubeClusterError(f"watching JobSet {jobset_name(name)} failed: "
                                                f"{obj.get('message')}")
                            expired = True  # history compacted: read the JobSet again
                            break
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if kind == "BOOKMARK":
                            continue
                        if kind == "DELETED":
                            raise KubeClusterError(f"JobSet {jobset_name(name)} was deleted before "
                                                   "it finished")
                        if obj.get("metadata", {}).get("uid") != uid:
                            raise KubeClusterError(f"JobSet {jobset_name(name)} was replaced by a new one "
                                            "with the same name")
                        state = jobset_state(obj)
                        if on_event is not None:
                            on_event(state, obj)
                        if state in done:
                            return state
            except (aiohttp.ClientError, TimeoutError, BrokenWatch) as exc:
                # A stream cut mid-line or a line that is not an event: what came after the last
                # good event is unknown, so the JobSet is read again before watching on.
                broken = _count_broken(broken, exc)
                expired = True
            finally:
                response.release()
        fresh = await get_jobset(api, name, namespace)
        if fresh is None:
            raise KubeClusterError(f"JobSet {jobset_name(name)} was deleted before it finished")
        if fresh["metadata"]["uid"] != uid:
            raise KubeClusterError(f"JobSet {jobset_name(name)} was replaced by a new one with the same name")
        jobset = fresh


MAX_BROKEN_WATCHES = 5
"""Watches in a row that may break (cut, unreadable, unreachable) before the watch gives up."""


class BrokenWatch(Exception):
    """A watch stream that is not a sequence of JSON event lines."""


def _count_broken(broken: int, exc: BaseException) -> int:
    """One more broken watch in a row; KubeClusterError once there were `MAX_BROKEN_WATCHES`."""
    broken += 1
    if broken >= MAX_BROKEN_WATCHES:
        raise KubeClusterError(f"watching the JobSet failed {broken} times in a row; last: "
                               f"{exc or type(exc).__name__}") from None
    return broken


async def _events(response: aiohttp.ClientResponse) -> AsyncGenerator[Obj, None]:
    """The JSON events of a watch stream, one per line (lines may exceed aiohttp's line limit).
    `BrokenWatch` for a line that is not a JSON object or a stream that ends mid-line."""
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield _event(line)
    if buffer.strip():
        raise BrokenWatch(f"watch stream ended mid-line: {buffer[:80]!r}")


def _event(line: bytes) -> Obj:
    try:
        event = json.loads(line)
    except ValueError:
        raise BrokenWatch(f"watch sent a line that is not JSON: {line[:80]!r}") from None
    if not isinstance(event, dict):
        raise BrokenWatch(f"watch sent a line that is not an event: {line[:80]!r}")
    return event


async def cancel(api: ApiClient, name: str, namespace: str) -> JobState:
    """Cancel run `name`: suspend its JobSet (its pods stop; the JobSet stays until `delete`).

    Returns the state after the call: Suspended, or the run's terminal state when it had already
    finished (nothing is changed then). The JSON Patch tests `metadata.uid` first; KubeError when
    the run does not exist or its JobSet was replaced or deleted meanwhile.
    """
    jobset = await get_jobset(api, name, namespace)
    if jobset is None:
        raise KubeError(f"no run {name} in namespace {namespace} (JobSet {jobset_name(name)} not found)")
    state = jobset_state(jobset)
    if state != JobState.RUNNING:
        return state
    patch = [{"op": "test", "path": "/metadata/uid", "value": jobset["metadata"]["uid"]},
             {"op": "add", "path": "/spec/suspend", "value": True}]
    try:
        await _call(api, "PATCH", _path(JOBSET_API_VERSION, JOBSETS, namespace, jobset_name(name)),
                    body=patch, content_type=JSON_PATCH)
    except ApiException as exc:
        if exc.status in (404, 422):
            raise KubeClusterError(f"JobSet {jobset_name(name)} was deleted or replaced while cancelling; "
                            "check `aiperf kube list`") from None
        raise KubeClusterError(f"cancelling run {name} failed: {_describe(exc)}") from None
    return JobState.SUSPENDED


async def delete(api: ApiClient, name: str, namespace: str, *, uid: str | None = None) -> list[str]:
    """Delete run `name`'s JobSet (its pods and service go with it), ConfigMap, CURVE key
    Secret, RoleBinding, Role and own ServiceAccount, with propagationPolicy Foreground. Objects
    already gone are skipped. Returns what was deleted, as `kind/name`; an empty list means
    nothing of the run was there.

    Every delete is fenced on the UID read just before (`preconditions.uid`): an object replaced
    by a same-name one meanwhile is left alone (RunReplaced, a KubeClusterError). With `uid` (the
    JobSet's, as `kube list` shows it) nothing is deleted unless the run's JobSet is that
    incarnation."""
    if uid is not None:
        jobset = await get_jobset(api, name, namespace)
        if jobset is not None and jobset["metadata"]["uid"] != uid:
            raise RunReplaced(f"run {name} is now JobSet uid {jobset['metadata']['uid']}, not {uid}: "
                              "a new run with the same name; nothing deleted")
    targets = [("JobSet", JOBSET_API_VERSION, JOBSETS, jobset_name(name)),
               ("ConfigMap", "v1", "configmaps", config_map_name(name)),
               ("Secret", "v1", "secrets", curve_secret_name(name)),
               ("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", jobset_name(name)),
               ("Role", "rbac.authorization.k8s.io/v1", "roles", jobset_name(name)),
               ("ServiceAccount", "v1", "serviceaccounts", jobset_name(name))]
    deleted: list[str] = []
    for kind, api_version, plural, object_name in targets:
        path = _path(api_version, plural, namespace, object_name)
        try:
            current: Obj = await _call(api, "GET", path)
            # The JobSet is fenced on the given uid itself: one replaced since the check is kept.
            fence = uid if kind == "JobSet" and uid is not None else current["metadata"]["uid"]
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
                    "preconditions": {"uid": fence}}
            await _call(api, "DELETE", path, body=body)
        except ApiException as exc:
            if exc.status == 404:
                continue
            if exc.status == 409:
                raise RunReplaced(f"{kind} {namespace}/{object_name} was replaced by a same-name one "
                                  "while deleting; left alone") from None
            raise KubeClusterError(f"deleting {kind} {namespace}/{object_name} failed: "
                                   f"{_describe(exc)}") from None
        deleted.append(f"{kind}/{object_name}")
    return deleted


async def list_pods(api: ApiClient, name: str, namespace: str, *,
                    replicated_job: str | None = None) -> list[Obj]:
    """The pods of run `name` (of one replicated job, e.g. `controller`, when given), by the
    labels JobSet puts on them; oldest first."""
    selector = f"{JOBSET_NAME_LABEL}={jobset_name(name)}"
    if replicated_job is not None:
        selector += f",{REPLICATED_JOB_LABEL}={replicated_job}"
    try:
        answer: Obj = await _call(api, "GET", _path("v1", "pods", namespace),
                                  query={"labelSelector": selector})
    except ApiException as exc:
        raise KubeClusterError(f"listing pods of run {name} failed: {_describe(exc)}") from None
    pods: list[Obj] = answer.get("items") or []
    return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))


async def list_events(api: ApiClient, namespace: str) -> list[Obj]:
    """The core/v1 Events of `namespace` (callers pick the objects they care about), oldest
    first by their last occurrence."""
    try:
        answer: Obj = await _call(api, "GET", _path("v1", "events", namespace))
    except ApiException as exc:
        raise KubeClusterError(f"listing the events of namespace {namespace} failed: {_describe(exc)}") from None
    events: list[Obj] = answer.get("items") or []
    return sorted(events, key=event_time)


def event_time(event: Mapping[str, Any]) -> str:
    """When an Event last happened (RFC 3339): lastTimestamp, else eventTime, else creation."""
    return str(event.get("lastTimestamp") or event.get("eventTime") or
               (event.get("metadata") or {}).get("creationTimestamp") or "")


async def controller_pod(api: ApiClient, name: str, namespace: str) -> str:
    """The name of run `name`'s controller pod (a Running one first, then the newest).
    KubeError when there is none."""
    pods = await list_pods(api, name, namespace, replicated_job=CONTROLLER_JOB)
    if not pods:
        raise KubeError(f"no controller pod for run {name} in namespace {namespace}; it is gone once the "
                        "run is cancelled or deleted, or its JobSet's TTL expired")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return str((running or pods)[-1]["metadata"]["name"])


async def pod_logs(api: ApiClient, pod: str, namespace: str, *, container: str | None = None,
                   tail: int | None = None) -> str:
    """The log of `container` of `pod` (None: its only container), the last `tail` lines when
    given. KubeError when the pod is missing or the container must be named."""
    query: dict[str, str] = {}
    if container is not None:
        query["container"] = container
    if tail is not None:
        query["tailLines"] = str(tail)
    response = await _open(api, _path("v1", "pods", namespace, pod, "log"), query)
    try:
        if response.status != 200:
            exc = await _error_of(response)
            if exc.status == 404:
                raise KubeError(f"pod {pod} not found in namespace {namespace}")
            raise KubeError(f"reading the log of pod {pod} failed: {api_status(exc)[2]}")
        return (await response.read()).decode("utf-8", "replace")
    finally:
        response.release()


__all__ = ["API_PORT", "APP_LABEL", "APP_LABEL_VALUE", "JOBSET_API_VERSION", "TERMINAL", "JobState", "JobSummary", "RunReplaced",
           "cancel", "controller_pod", "create_all", "delete", "ensure_namespace_exists", "get_jobset", "jobset_state",
           "leaving", "list_jobs", "list_pods", "pod_logs", "summarize", "watch_jobset_until_done"]
