"""The run's end and its results, read from the controller pod (direct mode and the operator).

The run is over when the controller pod's `control-plane` container has terminated (its exit
code is the run's verdict); the JobSet completes only later, once the `results-sidecar`
container has exited too. The exports are read from that sidecar through the API server's pod
proxy (`.../pods/POD:9091/proxy/...`, see `aiperf.api.results_app` for its endpoints), which
reaches only a running container, and the sidecar is retired with `POST /shutdown`.

Every function takes an `ApiClient`; `KubeError` is for what the user can fix (no such run),
`KubeClusterError` for a failure of the cluster or of the sidecar (unreachable, an error answer).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.kube.client import KubeClusterError
from aiperf.kube.containers import CONTROL_PLANE_CONTAINER, RESULTS_PORT
from aiperf.kube.names import CONTROLLER_JOB, jobset_name
from aiperf.kube.ops import (
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
    BrokenWatch,
    JobState,
    _call,
    _count_broken,
    _describe,
    _error_of,
    _events,
    _open,
    _path,
    _unreachable,
    controller_pod,
    list_pods,
    watch_jobset_until_done,
)
from aiperf.runtime.errors import root_cause

Obj = dict[str, Any]
KEEP_SIDECAR_ANNOTATION = "aiperf.nvidia.com/keep-results-sidecar"
"""On an AIPerfJob, `"true"`: the operator copies the results but leaves the results sidecar
running (the attached `aiperf kube profile`, `kube shutdown` or its linger time retires it)."""
RESULT_FILES = ("profile_export_aiperf.json", "profile_export_aiperf.csv", "profile_export.jsonl",
                "inputs.json", "profile_export_console.txt", "server_metrics_export.json",
                "server_metrics_export.csv")
"""The export files a run produces (the sidecar serves those present)."""


@dataclass(frozen=True, kw_only=True)
class RunEnd:
    """How a run ended as its pods show it: `exit_code` of the control plane when its container
    terminated (`pod` names the controller pod), else `state`, the JobSet's terminal or Suspended
    state when the JobSet ended first (a worker failure, cancel, or a finished TTL-less run)."""

    exit_code: int | None = None
    pod: str | None = None
    state: JobState | None = None

    @property
    def succeeded(self) -> bool:
        """The control plane exited 0, or the JobSet completed."""
        return self.exit_code == 0 or (self.exit_code is None and self.state == JobState.COMPLETED)


def control_plane_exit(pod: Mapping[str, Any]) -> int | None:
    """The exit code of the pod's `control-plane` container once it has terminated, else None."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTROL_PLANE_CONTAINER:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated is not None:
                return int(terminated.get("exitCode", 1))
    return None


JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
"""The label JobSet puts on its Jobs and pods: the UID of the JobSet that made them."""


async def controller_end(api: ApiClient, name: str, namespace: str, *,
                         jobset_uid: str | None = None) -> RunEnd | None:
    """The run's end as its controller pods show it (the newest pod whose control plane has
    terminated), None while the control plane runs or before there is a controller pod. With
    `jobset_uid`, a pod labelled as made by another JobSet of the same name (an earlier
    incarnation of the run, still terminating) does not count."""
    for pod in reversed(await list_pods(api, name, namespace, replicated_job=CONTROLLER_JOB)):
        made_by = (pod["metadata"].get("labels") or {}).get(JOBSET_UID_LABEL)
        if jobset_uid is not None and made_by is not None and made_by != jobset_uid:
            continue
        code = control_plane_exit(pod)
        if code is not None:
            return RunEnd(exit_code=code, pod=str(pod["metadata"]["name"]))
    return None


async def wait_run_end(api: ApiClient, name: str, namespace: str,
                       on_event: Callable[[JobState, Obj], None] | None = None, *,
                       watch_timeout_s: int = 300) -> RunEnd:
    """Block until run `name` is over: its control plane has terminated (a watch on the
    controller pods), or its JobSet is Completed, Failed or Suspended (cancelled; the JobSet
    watch of `aiperf.kube.ops.watch_jobset_until_done`, whose `on_event(state, jobset)` sees
    every change). KubeError when the run does not exist; KubeClusterError when its JobSet goes
    away meanwhile or a watch keeps failing. Wrap in `anyio.fail_after` for a deadline."""
    ends: list[RunEnd] = []
    try:
        async with anyio.create_task_group() as tg:

            async def jobset() -> None:
                state = await watch_jobset_until_done(api, name, namespace, on_event, watch_timeout_s=watch_timeout_s)
                ends.append(RunEnd(state=state))
                tg.cancel_scope.cancel()

            async def pods() -> None:
                ends.append(await _watch_control_plane(api, name, namespace, watch_timeout_s))
                tg.cancel_scope.cancel()

            tg.start_soon(jobset)
            tg.start_soon(pods)
    except BaseExceptionGroup as group:
        raise root_cause(group) from None  # one watch failed: its error, not a group
    return ends[0]


async def _watch_control_plane(api: ApiClient, name: str, namespace: str, watch_timeout_s: int) -> RunEnd:
    """Return once a controller pod's control plane has terminated: list the controller pods,
    then watch them from that resourceVersion (listing again after a timeout, 410 or a break)."""
    selector = f"{JOBSET_NAME_LABEL}={jobset_name(name)},{REPLICATED_JOB_LABEL}={CONTROLLER_JOB}"
    broken = 0
    while True:
        try:
            listing: Obj = await _call(api, "GET", _path("v1", "pods", namespace), query={"labelSelector": selector})
        except ApiException as exc:
            raise KubeClusterError(f"listing the controller pods of run {name} failed: {_describe(exc)}") from None
        for pod in reversed(listing.get("items") or []):
            if (code := control_plane_exit(pod)) is not None:
                return RunEnd(exit_code=code, pod=str(pod["metadata"]["name"]))
        query = {"watch": "true", "labelSelector": selector, "allowWatchBookmarks": "true",
                 "resourceVersion": str(listing.get("metadata", {}).get("resourceVersion", "")),
                 "timeoutSeconds": str(watch_timeout_s)}
        try:
            response = await _open(api, _path("v1", "pods", namespace), query)
            try:
                if response.status != 200:
                    raise KubeClusterError(f"watching the controller pods of run {name} failed: "
                                           f"{_describe(await _error_of(response))}")
                async with aclosing(_events(response)) as events:
                    async for event in events:
                        broken = 0
                        pod = event.get("object") or {}
                        if event.get("type") in ("ADDED", "MODIFIED") and (code := control_plane_exit(pod)) is not None:
                            return RunEnd(exit_code=code, pod=str(pod["metadata"]["name"]))
                        if event.get("type") == "ERROR":
                            break  # 410 Expired or another watch error: list again
            finally:
                response.release()
        except (aiohttp.ClientError, TimeoutError, BrokenWatch) as exc:
            broken = _count_broken(broken, exc)


def _proxy(namespace: str, pod: str, path: str) -> str:
    return _path("v1", "pods", namespace, f"{pod}:{RESULTS_PORT}", "proxy") + path


async def _request(api: ApiClient, method: str, url: str) -> aiohttp.ClientResponse:
    """`method url` through the API server; the unread response (any status), to release."""
    try:
        response: aiohttp.ClientResponse = await api.call_api(
            url, method, header_params={"Accept": "*/*"}, auth_settings=["BearerToken"],
            _return_http_data_only=True, _preload_content=False)
    except aiohttp.ClientError as exc:
        raise _unreachable(api, exc) from None
    return response


async def _json(api: ApiClient, namespace: str, pod: str, path: str) -> Any:
    response = await _open(api, _proxy(namespace, pod, path))
    try:
        if response.status != 200:
            raise _sidecar_error(pod, path, await _error_of(response))
        return await response.json(content_type=None)
    finally:
        response.release()


def _sidecar_error(pod: str, what: str, exc: ApiException) -> KubeClusterError:
    return KubeClusterError(f"reading {what} from the results sidecar of pod {pod} (port {RESULTS_PORT}) failed: "
                            f"{_describe(exc)}; it is gone after `aiperf kube shutdown` or its linger time")


async def sidecar_status(api: ApiClient, namespace: str, pod: str) -> Obj:
    """The sidecar's `/api/status` (`ended`, `exit_code`, `results_ready`, ...)."""
    status: Obj = await _json(api, namespace, pod, "/api/status")
    return status


async def wait_sidecar_ended(api: ApiClient, namespace: str, pod: str, *, poll_s: float = 1.0,
                             timeout_s: float = 60.0) -> Obj:
    """Wait until the sidecar says the run has ended (it notices within a few seconds of the
    control plane's exit) and return its status; KubeClusterError after `timeout_s`."""
    with anyio.move_on_after(timeout_s):
        while not (status := await sidecar_status(api, namespace, pod)).get("ended"):
            await anyio.sleep(poll_s)
        return status
    raise KubeClusterError(f"the results sidecar of pod {pod} did not see the run end within {timeout_s:g} s")


async def list_exports(api: ApiClient, namespace: str, pod: str) -> list[str]:
    """The names of the export files the sidecar has (the run must have ended)."""
    listing = await _json(api, namespace, pod, "/api/results/files")
    return [str(f["name"]) for f in listing.get("files") or []]


async def download_export(api: ApiClient, namespace: str, pod: str, file_name: str, dest: Path, *,
                          durable: bool = False) -> Path:
    """Download one export file into `dest` whole or not at all (a temporary name, then a
    rename; with `durable` the file is fsynced before the rename). KubeClusterError when the
    sidecar cannot be reached, answers an error, or the transfer breaks."""
    path = _proxy(namespace, pod, "/api/results/files/" + quote(file_name, safe=""))
    target = dest / file_name
    partial = dest / f".{file_name}.{uuid.uuid4().hex[:8]}.part"
    response = await _open(api, path)
    try:
        if response.status != 200:
            raise _sidecar_error(pod, file_name, await _error_of(response))
        try:
            async with await anyio.open_file(partial, "wb") as out:
                async for chunk in response.content.iter_chunked(1 << 16):
                    await out.write(chunk)
                if durable:
                    await out.flush()
                    await anyio.to_thread.run_sync(os.fsync, out.wrapped.fileno())
            await anyio.Path(partial).rename(target)
        except aiohttp.ClientError as exc:
            raise KubeClusterError(f"downloading {file_name} from pod {pod} broke off: {exc}") from None
        finally:
            await anyio.Path(partial).unlink(missing_ok=True)
    finally:
        response.release()
    return target


@dataclass(frozen=True, kw_only=True)
class FetchedResults:
    """What `fetch_results_from_pods` wrote: files under the destination, the export names the
    sidecar does not have (not produced by this run), and the sidecar's status."""

    pod: str
    written: list[Path]
    missing: list[str]
    status: Obj


async def results_pod(api: ApiClient, name: str, namespace: str) -> str:
    """The controller pod to read run `name`'s results from: the newest whose control plane has
    ended, else the running one (`aiperf.kube.ops.controller_pod`)."""
    end = await controller_end(api, name, namespace)
    return end.pod if end is not None and end.pod is not None else await controller_pod(api, name, namespace)


async def fetch_results_from_pods(api: ApiClient, name: str, namespace: str, dest: Path, *,
                                  pod: str | None = None, ended_timeout_s: float = 60.0) -> FetchedResults:
    """Download run `name`'s export files from its controller pod's results sidecar into `dest`
    (each whole or not at all), once the sidecar says the run has ended (waiting up to
    `ended_timeout_s`). KubeError when there is no controller pod; KubeClusterError when the
    sidecar cannot be reached (gone after `aiperf kube shutdown`, its linger time, or a deleted
    run) or a transfer fails."""
    pod = pod or await results_pod(api, name, namespace)
    status = await wait_sidecar_ended(api, namespace, pod, timeout_s=ended_timeout_s)
    names = await list_exports(api, namespace, pod)
    dest.mkdir(parents=True, exist_ok=True)
    written = [await download_export(api, namespace, pod, file_name, dest) for file_name in names]
    return FetchedResults(pod=pod, written=written, missing=[f for f in RESULT_FILES if f not in names],
                          status=status)


async def shutdown_sidecar(api: ApiClient, namespace: str, pod: str) -> bool:
    """`POST /shutdown` to the sidecar: it exits 0, the controller Job then completes. True when it
    accepted, False when it was already gone (nothing listens any more)."""
    response = await _request(api, "POST", _proxy(namespace, pod, "/shutdown"))
    try:
        if response.status == 202:
            return True
        exc = await _error_of(response)
        if exc.status in (404, 503):
            return False
        raise KubeClusterError(f"shutting down the results sidecar of pod {pod} failed: {_describe(exc)}")
    finally:
        response.release()


__all__ = ["KEEP_SIDECAR_ANNOTATION", "RESULT_FILES", "FetchedResults", "RunEnd", "control_plane_exit", "controller_end", "download_export",
           "fetch_results_from_pods", "list_exports", "results_pod", "shutdown_sidecar", "sidecar_status",
           "wait_run_end", "wait_sidecar_ended"]
