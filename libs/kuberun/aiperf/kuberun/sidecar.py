"""The run's end and its results, read from the controller pod (direct mode and the operator).

The run is over when the controller pod's `control-plane` container has terminated (its exit
code is the run's verdict); the JobSet completes only later, once the `results-sidecar`
container has exited too. The exports are read from that sidecar through the API server's pod
proxy (`.../pods/POD:9091/proxy/...`, see the results-sidecar service for its endpoints), which
reaches only a running container, and the sidecar is retired with `POST /shutdown`.

Every function takes a `KubeApi`; `KubeError` is for what the user can fix (no such run),
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

from aiperf.kube.containers import CONTROL_PLANE_CONTAINER, RESULTS_PORT
from aiperf.kube.names import (
    CONTROLLER_JOB,
    JOBSET_NAME_LABEL,
    JOBSET_UID_LABEL,
    REPLICATED_JOB_LABEL,
    jobset_name,
)
from aiperf.kubeapi import PODS, ApiError, Event, KubeApi, KubeClusterError, Listing, Obj, proxy_path, watch
from aiperf.kuberun.direct import JobState, controller_pod, list_pods, watch_jobset_until_done
from aiperf.runtime.errors import root_cause

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


def _ended(pods: list[Obj]) -> RunEnd | None:
    """The end of the newest of `pods` (oldest first) whose control plane has terminated."""
    for pod in reversed(pods):
        if (code := control_plane_exit(pod)) is not None:
            return RunEnd(exit_code=code, pod=str(pod["metadata"]["name"]))
    return None


async def controller_end(api: KubeApi, name: str, namespace: str, *,
                         jobset_uid: str | None = None) -> RunEnd | None:
    """The run's end as its controller pods show it (the newest pod whose control plane has
    terminated), None while the control plane runs or before there is a controller pod. With
    `jobset_uid`, a pod labelled as made by another JobSet of the same name (an earlier
    incarnation of the run, still terminating) does not count."""
    pods = [p for p in await list_pods(api, name, namespace, replicated_job=CONTROLLER_JOB)
            if jobset_uid is None or (p["metadata"].get("labels") or {}).get(JOBSET_UID_LABEL) in (None, jobset_uid)]
    return _ended(pods)


async def wait_run_end(api: KubeApi, name: str, namespace: str,
                       on_event: Callable[[JobState, Obj], None] | None = None, *,
                       watch_timeout_s: int = 300) -> RunEnd:
    """Block until run `name` is over: its control plane has terminated (a watch on the
    controller pods), or its JobSet is Completed, Failed or Suspended (cancelled; the JobSet
    watch of `aiperf.kuberun.direct.watch_jobset_until_done`, whose `on_event(state, jobset)`
    sees every change). KubeError when the run does not exist; KubeClusterError when its JobSet
    goes away meanwhile or a watch keeps failing. Wrap in `anyio.fail_after` for a deadline."""
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


async def _watch_control_plane(api: KubeApi, name: str, namespace: str, watch_timeout_s: int) -> RunEnd:
    """Return once a controller pod's control plane has terminated: list the controller pods,
    then watch them (listing again after any watch error)."""
    selector = f"{JOBSET_NAME_LABEL}={jobset_name(name)},{REPLICATED_JOB_LABEL}={CONTROLLER_JOB}"

    async def relist() -> Listing:
        try:
            return await api.list_all(PODS, namespace, label_selector=selector)
        except ApiError as exc:
            raise KubeClusterError(f"listing the controller pods of run {name} failed: {exc.describe()}") from None

    start = await relist()
    if (end := _ended(start.items)) is not None:
        return end
    changes = watch(api, PODS.path(namespace), start=start, relist=relist, label_selector=selector,
                    what=f"the controller pods of run {name}", watch_timeout_s=watch_timeout_s)
    async with aclosing(changes):
        async for change in changes:
            pods = [change.object] if isinstance(change, Event) and change.type != "DELETED" else \
                change.items if isinstance(change, Listing) else []
            if (end := _ended(pods)) is not None:
                return end
    raise AssertionError("a watch ends only by an error")  # pragma: no cover


async def _read(api: KubeApi, method: str, namespace: str, pod: str, path: str, *, stream: bool = False
                ) -> aiohttp.ClientResponse:
    """`method path` on the results sidecar of `pod`; the unread response (any status), to release."""
    return await api.open(method, proxy_path(PODS, namespace, pod, RESULTS_PORT, path), accept="*/*", stream=stream)


async def _json(api: KubeApi, namespace: str, pod: str, path: str) -> Any:
    response = await _read(api, "GET", namespace, pod, path)
    try:
        if response.status != 200:
            raise _sidecar_error(pod, path, ApiError(response.status, await response.read()))
        return await response.json(content_type=None)
    finally:
        response.release()


def _sidecar_error(pod: str, what: str, exc: ApiError) -> KubeClusterError:
    return KubeClusterError(f"reading {what} from the results sidecar of pod {pod} (port {RESULTS_PORT}) failed: "
                            f"{exc.describe()}; it is gone after `aiperf kube shutdown` or its linger time")


async def sidecar_status(api: KubeApi, namespace: str, pod: str) -> Obj:
    """The sidecar's `/api/status` (`ended`, `exit_code`, `results_ready`, ...)."""
    status: Obj = await _json(api, namespace, pod, "/api/status")
    return status


async def wait_sidecar_ended(api: KubeApi, namespace: str, pod: str, *, poll_s: float = 1.0,
                             timeout_s: float = 60.0) -> Obj:
    """Wait until the sidecar says the run has ended (it notices within a few seconds of the
    control plane's exit) and return its status; KubeClusterError after `timeout_s`."""
    with anyio.move_on_after(timeout_s):
        while not (status := await sidecar_status(api, namespace, pod)).get("ended"):
            await anyio.sleep(poll_s)
        return status
    raise KubeClusterError(f"the results sidecar of pod {pod} did not see the run end within {timeout_s:g} s")


async def list_exports(api: KubeApi, namespace: str, pod: str) -> list[str]:
    """The names of the export files the sidecar has (the run must have ended)."""
    listing = await _json(api, namespace, pod, "/api/results/files")
    return [str(f["name"]) for f in listing.get("files") or []]


async def download_export(api: KubeApi, namespace: str, pod: str, file_name: str, dest: Path, *,
                          durable: bool = False) -> Path:
    """Download one export file into `dest` whole or not at all (a temporary name, then a
    rename; with `durable` the file is fsynced before the rename). KubeClusterError when the
    sidecar cannot be reached, answers an error, or the transfer breaks."""
    target = dest / file_name
    partial = dest / f".{file_name}.{uuid.uuid4().hex[:8]}.part"
    response = await _read(api, "GET", namespace, pod, "/api/results/files/" + quote(file_name, safe=""),
                           stream=True)
    try:
        if response.status != 200:
            raise _sidecar_error(pod, file_name, ApiError(response.status, await response.read()))
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


async def results_pod(api: KubeApi, name: str, namespace: str) -> str:
    """The controller pod to read run `name`'s results from: the newest whose control plane has
    ended, else the running one (`aiperf.kuberun.direct.controller_pod`)."""
    end = await controller_end(api, name, namespace)
    return end.pod if end is not None and end.pod is not None else await controller_pod(api, name, namespace)


async def fetch_results_from_pods(api: KubeApi, name: str, namespace: str, dest: Path, *,
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


async def shutdown_sidecar(api: KubeApi, namespace: str, pod: str) -> bool:
    """`POST /shutdown` to the sidecar: it exits 0, the controller Job then completes. True when it
    accepted, False when it was already gone (nothing listens any more)."""
    response = await _read(api, "POST", namespace, pod, "/shutdown")
    try:
        if response.status == 202:
            return True
        if response.status in (404, 503):
            return False
        error = ApiError(response.status, await response.read())
        raise KubeClusterError(f"shutting down the results sidecar of pod {pod} failed: {error.describe()}")
    finally:
        response.release()


__all__ = ["RESULT_FILES", "FetchedResults", "RunEnd", "control_plane_exit",
           "controller_end", "download_export", "fetch_results_from_pods", "list_exports", "results_pod",
           "shutdown_sidecar", "sidecar_status", "wait_run_end", "wait_sidecar_ended"]
