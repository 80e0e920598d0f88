"""Live status of AIPerfJobs for the dashboard, read from the Kubernetes API (operator mode).

Given an API client (in-cluster in the operator Deployment's `results-server` container), the
results server also answers

| route | answer |
|---|---|
| ``GET /api/v1/jobs/<ns>/<name>/status`` | the job's progress snapshot (`snapshot_of`) |
| ``WS /api/v1/ws/jobs/<ns>/<name>`` | that snapshot at once, then one per status change |

A snapshot has the shape the dashboard's job page renders (the api's ``/api/progress``):
``jobPhase`` (`status.phase`, ``Pending`` before the operator set one), ``state``
(`status.subPhase`), ``progress`` (one entry per benchmark phase: ``phase``, ``kind``,
``completed``, ``expected``, ``errors``, ``cancelled``, ``sent``, ``requestsPerSecond``,
``elapsed_s``, in phase order), the profiling counters (``progressPercent``,
``requestsCompleted``, ``requestsTotal``, ``requestsPerSecond``), ``workers`` (as in the CR),
``failures`` (one line per controller failure or startup issue) and the job's identity and times.

`JobStatusFeed.progress(ns, name)` is the short form the job list shows beside a job still
going (``completed``, ``expected``, ``errors`` of its current phase, profiling first); None
when it cannot be had (the list is served without it, never fails for it).

Errors: a namespace that is not a DNS-1123 label or a name that is not a DNS-1123 subdomain is
422 (close code 4422 on the socket), an unknown job 404 (4404; also when it is deleted while
watched), the API server unreachable or refusing 503 (1011) with one line, never a traceback.

The socket follows ONE watch of the job (``fieldSelector=metadata.name=<name>``, reopened from
the last resourceVersion when the server ends it, `aiperf.kubeapi.watch`): no polling.
It sends only when the status changed (a heartbeat annotation alone sends nothing; a slow
client gets the newest snapshot, never a backlog) and closes with 1000 after the snapshot of a
terminal phase, at once when the client leaves, with 1013 when `max_sockets` are already open
(the page polls the status route instead) and with 1001 on `close()` (server stopping).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import anyio
import structlog
from litestar import WebSocket, get, websocket
from litestar.exceptions import (
    ClientException,
    NotFoundException,
    ServiceUnavailableException,
    WebSocketDisconnect,
)
from litestar.params import FromPath
from litestar.types import ControllerRouterHandler

from aiperf.kube.names import is_dns1123_label, is_dns1123_subdomain
from aiperf.kubeapi import ApiError, Event, KubeApi, KubeClusterError, Listing, Obj, watch
from aiperf.kuberun.jobs import JOBS
from aiperf.kuberun.status_push import TERMINAL

log = structlog.get_logger("aiperf.results")

STATUS_PATH = "/api/v1/jobs/{ns}/{name}/status"
SOCKET_PATH = "/api/v1/ws/jobs/{ns}/{name}"
"""The routes as dashboard URL templates (`aiperf.dashboard.DataSource`)."""
DEFAULT_MAX_SOCKETS = 64
CLOSE_FINISHED, CLOSE_STOPPING, CLOSE_API_ERROR, CLOSE_BUSY = 1000, 1001, 1011, 1013
CLOSE_INVALID, CLOSE_NOT_FOUND = 4422, 4404


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _elapsed(phase: Obj, now: datetime) -> float | None:
    start = _time(phase.get("startTime"))
    if start is None:
        return None
    end = _time(phase.get("endTime")) or now
    return round(max((end - start).total_seconds(), 0.0), 3)


def _failures(status: Obj) -> list[str]:
    out = []
    if failure := status.get("controllerFailure"):
        where = f"{failure['service']}: " if failure.get("service") else ""
        out.append(f"{where}{failure.get('message', '')}")
    if issue := status.get("startupIssue"):
        out.append(f"{issue.get('reason', '')}: {issue.get('message') or ''}".rstrip(": "))
    return out


def snapshot_of(job: Obj, *, now: datetime) -> Obj:
    """The dashboard's progress snapshot of the AIPerfJob object `job` (see the module doc);
    `now` ends the elapsed time of a phase still running. Pure; tolerates a missing status."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    phases = sorted((status.get("phases") or {}).items(), key=lambda kv: (kv[1].get("phaseIndex", 0), kv[0]))
    progress = {name: {"phase": name, "kind": p.get("phaseKind"), "completed": p.get("requestsCompleted", 0),
                       "expected": p.get("requestsTotal"), "errors": p.get("requestsFailed", 0),
                       "cancelled": p.get("requestsCancelled", 0), "sent": p.get("requestsSent"),
                       "requestsPerSecond": p.get("requestsPerSecond"), "elapsed_s": _elapsed(p, now)}
                for name, p in phases}
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
            "jobPhase": status.get("phase") or "Pending", "state": status.get("subPhase"),
            "currentPhase": status.get("currentPhase"), "progress": progress,
            **{key: status.get(key) for key in ("progressPercent", "requestsCompleted", "requestsTotal",
                                                "requestsPerSecond", "workers", "runEpoch", "startTime",
                                                "completionTime")},
            "failures": _failures(status)}


def jobs_path(namespace: str) -> str:
    """The AIPerfJob collection of `namespace`."""
    return JOBS.path(namespace)


class _Invalid(Exception):
    pass


class _Gone(Exception):
    pass


def _check(ns: str, name: str) -> None:
    if not is_dns1123_label(ns):
        raise _Invalid(f"invalid namespace {ns!r}: a DNS-1123 label (lowercase letters, digits, '-')")
    if not is_dns1123_subdomain(name):
        raise _Invalid(f"invalid job name {name!r}: a DNS-1123 subdomain (lowercase letters, digits, '-', '.')")


class _Latest:
    """The newest state of one watched job: its object, or that it is gone or unreadable; `wait`
    blocks until the next change (changes in between are coalesced)."""

    def __init__(self, obj: Obj) -> None:
        self.obj, self.gone, self.error = obj, False, ""
        self._changed = anyio.Event()

    def put(self, obj: Obj | None) -> None:
        if obj is None:
            self.gone = True
        else:
            self.obj = obj
        self._changed.set()

    def fail(self, error: str) -> None:
        self.error = error
        self._changed.set()

    async def wait(self) -> None:
        await self._changed.wait()
        self._changed = anyio.Event()


class JobStatusFeed:
    """Reads AIPerfJobs through `api` (the caller owns and closes it) for the routes of
    `job_status_routes`. `max_sockets` bounds the sockets open at once; `clock` gives `now` for
    the snapshots; `read_timeout_s` bounds each read of a job (an API server that does not answer
    is a 503, not a hung request); `watch_timeout_s` is how long one watch request lasts before it
    is reopened."""

    def __init__(self, *, api: KubeApi, max_sockets: int = DEFAULT_MAX_SOCKETS,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), read_timeout_s: float = 10.0,
                 watch_timeout_s: int = 300) -> None:
        self._api, self._clock, self._watch_timeout_s = api, clock, watch_timeout_s
        self._read_timeout_s = read_timeout_s
        self._slots = anyio.CapacityLimiter(max_sockets)
        self._closing = anyio.Event()
        self._idle: anyio.Event | None = None

    @property
    def open_sockets(self) -> int:
        """Sockets being served right now."""
        return int(self._slots.borrowed_tokens)

    async def _read(self, ns: str, name: str) -> Listing:
        """The job, alone in a listing (its resourceVersion starts a watch): `_Invalid`, `_Gone`,
        or KubeClusterError (one line)."""
        _check(ns, name)
        listing: Listing | None = None
        with anyio.move_on_after(self._read_timeout_s) as deadline:
            listing = await self._list(ns, name)
        if deadline.cancelled_caught or listing is None:
            raise KubeClusterError(f"the API server did not answer within {self._read_timeout_s:g} s")
        if not listing.items:
            raise _Gone(f"no AIPerfJob {ns}/{name}")
        return Listing(listing.items[:1], listing.resource_version)

    async def _list(self, ns: str, name: str) -> Listing:
        """The job `ns/name`, alone in a listing (empty when there is none)."""
        try:
            return await self._api.list_all(JOBS, ns, field_selector=f"metadata.name={name}")
        except ApiError as exc:
            if exc.not_found:
                raise KubeClusterError("the API server does not serve AIPerfJobs: is the aiperf CRD installed?") from None
            raise

    async def snapshot(self, ns: str, name: str) -> Obj:
        """The job's snapshot now; HTTP 422, 404 or 503 as the module doc says."""
        try:
            job = await self._read(ns, name)
        except _Invalid as exc:
            raise ClientException(status_code=422, detail=str(exc)) from None
        except _Gone as exc:
            raise NotFoundException(detail=str(exc)) from None
        except KubeClusterError as exc:
            raise ServiceUnavailableException(detail=_line(exc)) from None
        return snapshot_of(job.items[0], now=self._clock())

    async def progress(self, ns: str, name: str) -> Obj | None:
        """The job list's progress of job `ns/name` (see the module doc); None when the job, its
        status or the API server cannot give one."""
        try:
            listing = await self._read(ns, name)
        except (_Invalid, _Gone, KubeClusterError):
            return None
        progress = snapshot_of(listing.items[0], now=datetime.now(UTC))["progress"]
        for phase in ("profiling", "warmup", *progress):
            if phase in progress:
                entry = progress[phase]
                return {key: entry[key] for key in ("phase", "completed", "expected", "errors")}
        return None

    async def stream(self, socket: WebSocket[Any, Any, Any], ns: str, name: str) -> None:
        """Serve one socket until the job ends, the client leaves or `close()` (module doc)."""
        await socket.accept()
        borrower = object()
        try:
            self._slots.acquire_on_behalf_of_nowait(borrower)
        except anyio.WouldBlock:
            await socket.close(code=CLOSE_BUSY, reason="too many live sockets; poll the status route")
            return
        try:
            code, reason = await self._serve(socket, ns, name)
        except* WebSocketDisconnect:
            code, reason = 0, ""
        finally:
            self._slots.release_on_behalf_of(borrower)
            if self._slots.borrowed_tokens == 0 and self._idle is not None:
                self._idle.set()
        if code and socket.connection_state != "disconnect":
            await socket.close(code=code, reason=reason[:120])

    async def _serve(self, socket: WebSocket[Any, Any, Any], ns: str, name: str) -> tuple[int, str]:
        try:
            listing = await self._read(ns, name)
        except _Invalid as exc:
            return CLOSE_INVALID, str(exc)
        except _Gone as exc:
            return CLOSE_NOT_FOUND, str(exc)
        except KubeClusterError as exc:
            return CLOSE_API_ERROR, _line(exc)
        latest = _Latest(listing.items[0])
        outcome = (0, "")
        async with anyio.create_task_group() as tg:
            tg.start_soon(_until_disconnect, socket, tg.cancel_scope)
            tg.start_soon(self._follow, ns, name, listing, latest)
            tg.start_soon(self._until_closing, latest)
            sent: Obj | None = None
            while True:
                if self._closing.is_set():
                    outcome = (CLOSE_STOPPING, "server stopping")
                    break
                if latest.gone:
                    outcome = (CLOSE_NOT_FOUND, f"AIPerfJob {ns}/{name} was deleted")
                    break
                if latest.error:
                    outcome = (CLOSE_API_ERROR, latest.error)
                    break
                status = latest.obj.get("status") or {}
                if status != sent:  # a heartbeat annotation alone changes no status
                    sent = status
                    await socket.send_json(snapshot_of(latest.obj, now=self._clock()))
                if status.get("phase") in TERMINAL:
                    outcome = (CLOSE_FINISHED, f"job {status['phase']}")
                    break
                await latest.wait()
            tg.cancel_scope.cancel()
        return outcome

    async def _follow(self, ns: str, name: str, start: Listing, latest: _Latest) -> None:
        changes = watch(self._api, jobs_path(ns), start=start, relist=lambda: self._list(ns, name),
                        field_selector=f"metadata.name={name}", watch_timeout_s=self._watch_timeout_s, resume=True)
        try:
            async with aclosing(changes):
                async for change in changes:
                    if isinstance(change, Event):
                        latest.put(None if change.type == "DELETED" else change.object)
                    else:
                        latest.put(change.items[0] if change.items else None)
        except KubeClusterError as exc:
            log.warning("results.job_watch_failed", namespace=ns, name=name, error=_line(exc))
            latest.fail(_line(exc))

    async def _until_closing(self, latest: _Latest) -> None:
        await self._closing.wait()
        latest.fail("server stopping")

    async def close(self) -> None:
        """Close every open socket (1001) and return once their handlers ended; later sockets
        close at once."""
        self._closing.set()
        while self._slots.borrowed_tokens:
            self._idle = anyio.Event()
            await self._idle.wait()


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _until_disconnect(socket: WebSocket[Any, Any, Any], scope: anyio.CancelScope) -> None:
    """Drain client messages (ignored); cancel `scope` when the client leaves."""
    while (await socket.receive())["type"] != "websocket.disconnect":
        pass
    scope.cancel()


def job_status_routes(feed: JobStatusFeed) -> list[ControllerRouterHandler]:
    """The status route and the socket over `feed` (paths: `STATUS_PATH`, `SOCKET_PATH`)."""

    @get(STATUS_PATH.replace("{ns}", "{ns:str}").replace("{name}", "{name:str}"))
    async def job_status(ns: FromPath[str], name: FromPath[str]) -> Obj:
        return await feed.snapshot(ns, name)

    @websocket(SOCKET_PATH.replace("{ns}", "{ns:str}").replace("{name}", "{name:str}"))
    async def job_socket(socket: WebSocket[Any, Any, Any], ns: FromPath[str], name: FromPath[str]) -> None:
        await feed.stream(socket, ns, name)

    return [job_status, job_socket]


__all__ = ["DEFAULT_MAX_SOCKETS", "SOCKET_PATH", "STATUS_PATH", "JobStatusFeed", "job_status_routes", "jobs_path",
           "snapshot_of"]
