"""The controller's half of an AIPerfJob's status, written from inside the run.

In operator mode the operator gives the controller pod's containers the CR's identity
(`JobRef.env()`: `AIPERF_JOB_NAME`, `AIPERF_JOB_NAMESPACE`, `AIPERF_JOB_UID`); direct mode has
no CR, sets none of them, and nothing is pushed (`JobRef.from_env` is None).

The controller owns `CONTROLLER_OWNED` of `status`; the operator never writes those keys, and
clears `subPhase` and `currentPhase` when it stamps a terminal phase. A `StatusReporter` pushes
a snapshot of them at least every `interval_s` and at once when poked (a state or phase
change), with the run pod's own ServiceAccount (its Role allows get and patch on this one CR
and its status, nothing else). Each push is:

1. one JSON Patch on the status subresource (`status_ops`): `test /metadata/uid` (a CR
   recreated under the same name is never written), `test /status/phase` with the phase last
   read (once there is one), then `add /status/<key>` per key of the snapshot;
2. then one JSON Patch on the CR refreshing the annotation `HEARTBEAT_ANNOTATION` (the time,
   RFC 3339), fenced by `test /metadata/uid` (`heartbeat_ops`).

So a push computed before the operator finished the run fails its `test` and changes nothing:
`subPhase` is never resurrected after Completed, Failed or Cancelled. A lost race (409, or 422
for a failed `test`) is logged at debug and the push is recomputed from a fresh read (up to
`attempts` times, then dropped); a CR already in a terminal phase, deleted or replaced ends the
reporter quietly. Any other rejection is logged with the response body (at warning when it is
transient: 429, 5xx; else at error) and raised
(`ApiError`; no answer at all: `Unreachable`) from `push`; `run` logs it and tries again
on the next tick, so status is advisory: it never stops the benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from aiperf.crd.model import API_GROUP, AIPerfJobStatus, JobPhase
from aiperf.kube.names import JOB_NAME_ENV, JOB_NAMESPACE_ENV, JOB_UID_ENV
from aiperf.kubeapi import JSON_PATCH, ApiError, InClusterError, Obj, Unreachable
from aiperf.kuberun.jobs import JOBS

log = structlog.get_logger("aiperf.kuberun.status_push")

HEARTBEAT_ANNOTATION = f"{API_GROUP}/controller-heartbeat"
CONTROLLER_OWNED = ("subPhase", "currentPhase", "phases", "workers", "requestsCompleted", "requestsTotal",
                    "requestsPerSecond", "progressPercent", "controllerFailure", "resultsExported",
                    "serverMetrics")
"""The `status` keys the run's controller writes (and the operator leaves alone)."""
TERMINAL = frozenset({JobPhase.COMPLETED.value, JobPhase.FAILED.value, JobPhase.CANCELLED.value})


@dataclass(frozen=True)
class JobRef:
    """The AIPerfJob a run reports to: its name, namespace and UID."""

    name: str
    namespace: str
    uid: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JobRef | None:
        """The CR named by the environment, None when none of the three variables is set (direct
        mode, local runs). Raises `InClusterError` when only some are set."""
        values = {key: env.get(key, "") for key in (JOB_NAME_ENV, JOB_NAMESPACE_ENV, JOB_UID_ENV)}
        if not any(values.values()):
            return None
        if not all(values.values()):
            missing = ", ".join(k for k, v in values.items() if not v)
            raise InClusterError(f"the AIPerfJob is named only in part: {missing} not set")
        return cls(name=values[JOB_NAME_ENV], namespace=values[JOB_NAMESPACE_ENV], uid=values[JOB_UID_ENV])

    def env(self) -> list[Obj]:
        """The container `env` entries that name this CR (what `from_env` reads)."""
        return [{"name": JOB_NAME_ENV, "value": self.name}, {"name": JOB_NAMESPACE_ENV, "value": self.namespace},
                {"name": JOB_UID_ENV, "value": self.uid}]

    def path(self, *, status: bool = False) -> str:
        """The URL path of the CR (of its status subresource when `status`)."""
        return JOBS.path(self.namespace, self.name, *(("status",) if status else ()))


def timestamp(now: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, whole seconds (what Kubernetes writes)."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode_status(status: AIPerfJobStatus) -> Obj:
    """The snapshot as status keys (camelCase, unset ones left out). Raises `ValueError` when it
    sets a key the controller does not own, or a `currentPhase` that is not a key of `phases`."""
    doc: Obj = msgspec.to_builtins(status)
    foreign = sorted(set(doc) - set(CONTROLLER_OWNED))
    if foreign:
        raise ValueError(f"the controller does not write status keys {', '.join(foreign)}")
    current = doc.get("currentPhase")
    if current is not None and current not in doc.get("phases", {}):
        raise ValueError(f"currentPhase {current!r} is not a key of phases")
    return doc


def status_ops(cr: Mapping[str, Any], status: AIPerfJobStatus, *, uid: str) -> list[Obj]:
    """The fenced JSON Patch (for the status subresource) writing `status` onto the CR as read
    (`cr`): tests on the UID and, when `cr` has one, its phase; then one `add` per key."""
    ops: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    current = cr.get("status")
    if current is None:  # `null` tests a missing key as equal: the operator must not have written since
        ops += [{"op": "test", "path": "/status", "value": None}, {"op": "add", "path": "/status", "value": {}}]
    elif current.get("phase") is not None:
        ops.append({"op": "test", "path": "/status/phase", "value": current["phase"]})
    ops += [{"op": "add", "path": f"/status/{key}", "value": value} for key, value in encode_status(status).items()]
    return ops


def heartbeat_ops(cr: Mapping[str, Any], *, uid: str, now: datetime) -> list[Obj]:
    """The JSON Patch (for the CR itself) setting `HEARTBEAT_ANNOTATION` to `now`, fenced on the UID
    (and, when the CR has no annotations yet, on their absence, so none is dropped)."""
    ops: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    if (cr.get("metadata") or {}).get("annotations") is None:
        return ops + [{"op": "test", "path": "/metadata/annotations", "value": None},
                      {"op": "add", "path": "/metadata/annotations",
                       "value": {HEARTBEAT_ANNOTATION: timestamp(now)}}]
    key = HEARTBEAT_ANNOTATION.replace("~", "~0").replace("/", "~1")
    return ops + [{"op": "add", "path": f"/metadata/annotations/{key}", "value": timestamp(now)}]


class KubeRequester(Protocol):
    """What the reporter needs of a client (`aiperf.kubeapi.KubeApi`, e.g. `in_cluster(...)`)."""

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = ...) -> Obj: ...


def _utc_now() -> datetime:
    return datetime.now(UTC)


class StatusReporter:
    """Pushes `snapshot()` to the AIPerfJob `job` through `client` (see the module doc).

    `run` pushes at once, then every `interval_s` and whenever `poke` is called, until the
    reporter is `finished` (the CR is terminal, deleted or replaced) or cancelled. `flush` makes
    one last push (the final state) within a deadline. Pushes never overlap. `clock` returns an
    aware datetime (the heartbeat's time)."""

    def __init__(self, *, client: KubeRequester, job: JobRef, snapshot: Callable[[], AIPerfJobStatus],
                 interval_s: float = 5.0, attempts: int = 3, clock: Callable[[], datetime] = _utc_now) -> None:
        self._client, self._job, self._snapshot = client, job, snapshot
        self._interval_s, self._attempts, self._clock = interval_s, attempts, clock
        self._live: Obj | None = None  # the CR as last read or written
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self.finished = False

    def poke(self) -> None:
        """Push again now (or right after the push in flight). Never blocks."""
        self._wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Push until finished or cancelled; a failed push is retried on the next tick."""
        task_status.started()
        while True:
            self._wake = anyio.Event()
            try:
                await self.push()
            except (ApiError, Unreachable):
                pass  # logged by push; status is advisory, the run goes on
            if self.finished:
                return
            with anyio.move_on_after(self._interval_s):
                await self._wake.wait()

    async def flush(self, *, timeout_s: float = 30.0, retry_s: float = 0.5) -> bool:
        """One last push (the run's final counts), tried again every `retry_s` while it is
        dropped (lost races), the API server does not answer or answers "not now" (429, 5xx:
        `ApiError.transient`), for at most `timeout_s`; True when it landed. Never raises for
        the API: another rejection (logged by `push`) ends it at once, a finished reporter
        (terminal, deleted or replaced CR) quietly, a deadline passed with a warning."""
        with anyio.move_on_after(timeout_s):
            while not self.finished:
                try:
                    if await self.push():
                        return True
                except ApiError as exc:
                    if not exc.transient:
                        return False
                except Unreachable:
                    pass
                if not self.finished:
                    await anyio.sleep(retry_s)
            return False
        log.warning("status.flush_timeout", timeout_s=timeout_s)
        return False

    async def push(self) -> bool:
        """Write the current snapshot and the heartbeat. True when the status landed; False when
        dropped (lost races `attempts` times) or when the reporter is finished. Raises
        `ApiError` for any other rejection and `Unreachable` without an answer (both
        logged here, the body included)."""
        async with self._lock:
            if self.finished:
                return False
            for _ in range(self._attempts):
                live = self._live if self._live is not None else await self._read()
                if live is None:
                    return False
                if (live.get("status") or {}).get("phase") in TERMINAL:
                    self._finish("status.run_ended", phase=live["status"]["phase"])
                    return False
                ops = status_ops(live, self._snapshot(), uid=self._job.uid)
                written = await self._patch(self._job.path(status=True), ops)
                if written is None:
                    continue
                self._live = written
                await self._heartbeat(written)
                return True
            log.debug("status.push_dropped", attempts=self._attempts)
            return False

    async def _heartbeat(self, live: Obj) -> None:
        written = await self._patch(self._job.path(), heartbeat_ops(live, uid=self._job.uid, now=self._clock()))
        if written is not None:
            self._live = written

    async def _read(self) -> Obj | None:
        """The live CR; None (and finished) when it is gone or is another CR of the same name."""
        try:
            cr = await self._client.request("GET", self._job.path())
        except ApiError as exc:
            if exc.status == 404:
                self._finish("status.cr_gone")
                return None
            self._log_rejected("GET", exc)
            raise
        except Unreachable as exc:
            log.warning("status.unreachable", error=str(exc))
            raise
        if (cr.get("metadata") or {}).get("uid") != self._job.uid:
            self._finish("status.cr_replaced", uid=(cr.get("metadata") or {}).get("uid"))
            return None
        self._live = cr
        return cr

    async def _patch(self, path: str, ops: list[Obj]) -> Obj | None:
        """Apply `ops`; the object as written, or None after a lost race (the next try re-reads)."""
        try:
            return await self._client.request("PATCH", path, body=ops, content_type=JSON_PATCH)
        except ApiError as exc:
            self._live = None
            if exc.lost_race:
                log.debug("status.lost_race", path=path, status=exc.status, message=exc.message)
                return None
            if exc.status == 404:
                self._finish("status.cr_gone")
                return None
            self._log_rejected("PATCH", exc)
            raise
        except Unreachable as exc:
            self._live = None
            log.warning("status.unreachable", error=str(exc))
            raise

    def _log_rejected(self, method: str, exc: ApiError) -> None:
        level = log.warning if exc.transient else log.error
        level("status.rejected", method=method, namespace=self._job.namespace, name=self._job.name,
              status=exc.status, body=exc.body)

    def _finish(self, event: str, **fields: Any) -> None:
        if not self.finished:
            log.info(event, namespace=self._job.namespace, name=self._job.name, **fields)
        self.finished = True
