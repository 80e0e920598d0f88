"""kopf wiring: which events call which reconciler method. No logic lives here: both kinds are
registered from one table (`KINDS`), so a trigger added to one kind is added to both.

`build_registry(connect=..., defaults=..., metrics=...)` returns a `kopf.OperatorRegistry`:
- startup: `connect()` opens the ApiClient (in kopf's own event loop) and builds the reconciler;
  cleanup closes the client;
- AIPerfJob create -> `create`; update of `spec.cancel` -> `cancel`; update of
  `spec.timeoutSeconds` -> `acknowledge` + `sync`; resume (operator restart), a timer every
  `resync_interval` seconds, and the run's controller pushing a running `status.subPhase` while
  the phase is Initializing -> `sync` (which promotes it to Running);
- AIPerfJob deletion -> `deleted` (the results index drops a run not yet stored; kopf holds its
  finalizer until it returns);
- JobSet events (label `app.kubernetes.io/name=aiperf`) -> `jobset_event`;
- AIPerfSweep (`aiperf.operator.sweep.SweepReconciler`): create -> `create`; update of
  `spec.cancel` -> `cancel`; update of `spec.ttlSecondsAfterFinished` -> `acknowledge` + `sync`;
  the sweep-controller setting `status.aggregation.phase: Complete` (an event filter: kopf's
  change detection never sees status), resume and a timer every `resync_interval` seconds ->
  `sync` (harvest, completion, TTL reaper); delete -> `delete` (cancels the children it owns);
- events of an AIPerfJob whose controller owner is an AIPerfSweep -> `child_event` (the roll-up).
The registry has no login handler: the caller adds one (main.py from the kubeconfig or the
pod's ServiceAccount; tests from the fake API server). Every handler counts itself in `metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import kopf

from aiperf.crd.model import API_GROUP, API_VERSION, SWEEP_KIND, JobPhase
from aiperf.kubeapi import JOBSETS, KubeApi, Obj
from aiperf.kuberun.direct import APP_LABEL, APP_LABEL_VALUE
from aiperf.operator.desired import Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.reconciler import JobReconciler, utc_now
from aiperf.operator.results import ResultsStore
from aiperf.operator.startup import DEFAULT_THRESHOLDS, StartupThresholds
from aiperf.operator.status import TERMINAL, benchmark_running
from aiperf.operator.sweep import SweepReconciler

JOBS = (API_GROUP, API_VERSION, "aiperfjobs")
SWEEPS = (API_GROUP, API_VERSION, "aiperfsweeps")
JOBSET_RESOURCE = (*JOBSETS.api_version.split("/"), JOBSETS.plural)


class Reconciler(Protocol):
    """What both reconcilers answer to (`JobReconciler`, `SweepReconciler`)."""

    async def create(self, body: Obj) -> None: ...

    async def cancel(self, body: Obj) -> None: ...

    async def acknowledge(self, ns: str, name: str, uid: str) -> None: ...

    async def sync(self, ns: str, name: str, uid: str) -> None: ...


@dataclass(frozen=True)
class Reconcilers:
    """The running operator's reconcilers, one per kind."""

    jobs: JobReconciler
    sweeps: SweepReconciler


class _Holder:
    """The running operator's client and reconcilers, set by the startup handler. `use()` lends
    them to one handler call; `close()` refuses new calls, waits for the lent ones to return
    (kopf may still be finishing a timer when its cleanup runs), then closes the client."""

    def __init__(self) -> None:
        self.api: KubeApi | None = None
        self.reconcilers: Reconcilers | None = None
        self._busy = 0
        self._idle: asyncio.Event | None = None

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[Reconcilers]:
        if self.reconcilers is None:
            raise kopf.TemporaryError("the operator is starting or stopping", delay=1)
        self._busy += 1
        try:
            yield self.reconcilers
        finally:
            self._busy -= 1
            if self._busy == 0 and self._idle is not None:
                self._idle.set()

    async def close(self, timeout: float) -> None:
        api, self.api, self.reconcilers = self.api, None, None
        try:
            if self._busy:
                self._idle = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), timeout)
        finally:  # also when the cleanup is cancelled while it waits: no connection left open
            if api is not None:
                await api.close()


CLOSE_TIMEOUT_S = 10.0
"""How long the cleanup waits for running handlers before closing the client under them."""
CANCELLATION_POLLING_S = 1.0
"""How soon kopf re-checks a stopping resync timer of a deleted CR (kopf's default, 60 s, holds
the CR's deletion that long when the timer was busy at the time)."""


def tune(settings: kopf.OperatorSettings) -> kopf.OperatorSettings:
    """`settings` adjusted for these handlers (see `CANCELLATION_POLLING_S`); returned for chaining."""
    settings.background.cancellation_polling = CANCELLATION_POLLING_S
    return settings


def _aggregate_ready(status: kopf.Status, **_: Any) -> bool:
    """The sweep-controller has written the aggregate and the sweep is not finished."""
    return (status.get("aggregation") or {}).get("phase") in ("Complete", "Failed") and status.get("phase") not in (
        JobPhase.COMPLETED.value, JobPhase.FAILED.value, JobPhase.CANCELLED.value)


def _sweep_child(meta: kopf.Meta, **_: Any) -> bool:
    """An AIPerfJob whose controller owner is an AIPerfSweep."""
    return any(ref.get("controller") and ref.get("kind") == SWEEP_KIND for ref in meta.get("ownerReferences") or [])


def _controller_is_running(status: kopf.Status, **_: Any) -> bool:
    """The run's controller pushed what moves it on while the phase is still Initializing (the
    benchmark under way, `benchmark_running`), or a failure while it has not ended."""
    phase = status.get("phase")
    if status.get("controllerFailure") and phase not in (None, *(p.value for p in TERMINAL)):
        return True
    return phase == JobPhase.INITIALIZING.value and benchmark_running({"status": status})


@dataclass(frozen=True)
class Kind:
    """One reconciled kind: its resource, the prefix of its handler ids, which reconciler serves
    it, the spec field whose edit is acknowledged then synced (`edit_id`), the status event that
    syncs it (`event_id`, `event_when`), and its reconciler's deletion method."""

    resource: tuple[str, str, str]
    prefix: str
    pick: Callable[[Reconcilers], Any]
    edit_field: str
    edit_id: str
    event_id: str
    event_when: Callable[..., bool]
    on_delete: str


KINDS = (
    Kind(JOBS, "", lambda r: r.jobs, "spec.timeoutSeconds", "timeout", "subphase", _controller_is_running, "deleted"),
    Kind(SWEEPS, "sweep-", lambda r: r.sweeps, "spec.ttlSecondsAfterFinished", "ttl", "aggregated", _aggregate_ready,
         "delete"),
)
"""AIPerfJob: create, cancel, edit of `spec.timeoutSeconds`, the controller pushing a running
subPhase, resume, resync timer, deletion. AIPerfSweep: the same with `spec.ttlSecondsAfterFinished`
and the sweep-controller's aggregate as its triggers."""


def build_registry(*, connect: Callable[[], Awaitable[KubeApi]], defaults: Defaults, metrics: Metrics,
                   resync_interval: float = 30.0, retry_delay: float = 5.0,
                   thresholds: StartupThresholds = DEFAULT_THRESHOLDS,
                   clock: Callable[[], datetime] = utc_now,
                   results: ResultsStore | None = None) -> kopf.OperatorRegistry:
    """The operator's handlers (see the module doc) in a new registry; `thresholds`, `clock` and
    `results` (the results volume finished runs are copied to) go to the reconcilers."""
    registry = kopf.OperatorRegistry()
    holder = _Holder()

    async def counted(handler: str, work: Callable[[Reconcilers], Awaitable[None]]) -> None:
        try:
            async with holder.use() as reconcilers:
                await work(reconcilers)
        except BaseException:
            metrics.failed(handler)
            raise
        metrics.reconciled(handler)

    @kopf.on.startup(registry=registry)
    async def open_client(**_: Any) -> None:
        api = holder.api = await connect()
        holder.reconcilers = Reconcilers(
            jobs=JobReconciler(api=api, defaults=defaults, metrics=metrics, retry_delay=retry_delay,
                               thresholds=thresholds, clock=clock, results=results),
            sweeps=SweepReconciler(api=api, metrics=metrics, defaults=defaults, clock=clock,
                                   retry_delay=retry_delay, results=results))

    @kopf.on.cleanup(registry=registry)
    async def close_client(**_: Any) -> None:
        await holder.close(timeout=CLOSE_TIMEOUT_S)

    for kind in KINDS:
        _register(registry, kind, counted, resync_interval)

    @kopf.on.event(*JOBSET_RESOURCE, id="jobset", labels={APP_LABEL: APP_LABEL_VALUE}, registry=registry)
    async def on_jobset(body: kopf.Body, **_: Any) -> None:
        await counted("jobset", lambda r: r.jobs.jobset_event(_plain(body)))

    @kopf.on.event(*JOBS, id="sweep-child", when=_sweep_child, registry=registry)
    async def on_sweep_child(body: kopf.Body, type: str | None, **_: Any) -> None:  # noqa: A002 - kopf's name
        if type != "DELETED":
            await counted("sweep-child", lambda r: r.sweeps.child_event(_plain(body)))

    return registry


Counted = Callable[[str, Callable[[Reconcilers], Awaitable[None]]], Awaitable[None]]


def _register(registry: kopf.OperatorRegistry, kind: Kind, counted: Counted, resync_interval: float) -> None:
    """The handlers of one kind (see `KINDS`), each counted under its id."""
    res, pre = kind.resource, kind.prefix

    def by_body(handler: str, method: str) -> Callable[..., Awaitable[None]]:
        async def handle(body: kopf.Body, **_: Any) -> None:
            await counted(handler, lambda r: getattr(kind.pick(r), method)(_plain(body)))
        return handle

    def by_name(handler: str, *, acknowledge: bool = False) -> Callable[..., Awaitable[None]]:
        async def handle(namespace: str | None, name: str, uid: str, **_: Any) -> None:
            async def work(r: Reconcilers) -> None:
                reconciler: Reconciler = kind.pick(r)
                if acknowledge:
                    await reconciler.acknowledge(str(namespace), name, uid)
                await reconciler.sync(str(namespace), name, uid)
            await counted(handler, work)
        return handle

    kopf.on.create(*res, id=f"{pre}create", registry=registry)(by_body(f"{pre}create", "create"))
    kopf.on.delete(*res, id=f"{pre}delete", registry=registry)(by_body(f"{pre}delete", kind.on_delete))
    kopf.on.update(*res, field="spec.cancel", id=f"{pre}cancel", registry=registry)(by_body(f"{pre}cancel", "cancel"))
    kopf.on.update(*res, field=kind.edit_field, id=f"{pre}{kind.edit_id}", registry=registry)(
        by_name(f"{pre}{kind.edit_id}", acknowledge=True))
    kopf.on.event(*res, id=f"{pre}{kind.event_id}", when=kind.event_when, registry=registry)(
        by_name(f"{pre}{kind.event_id}"))
    kopf.on.resume(*res, id=f"{pre}resume", registry=registry)(by_name(f"{pre}resume"))
    kopf.timer(*res, id=f"{pre}resync", interval=resync_interval, registry=registry)(by_name(f"{pre}resync"))


def _plain(body: kopf.Body) -> dict[str, Any]:
    """kopf's read-only body view as a plain dict."""
    return {key: _copy(value) for key, value in body.items()}


def _copy(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
