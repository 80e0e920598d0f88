"""kopf wiring: which events call which `JobReconciler` method. No logic lives here.

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
from datetime import datetime
from typing import Any

import kopf
from kubernetes_asyncio.client import ApiClient

from aiperf.kube.crd_model import API_GROUP, API_VERSION, SWEEP_KIND, JobPhase
from aiperf.kube.ops import APP_LABEL, APP_LABEL_VALUE
from aiperf.operator.desired import Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.reconciler import JobReconciler, utc_now
from aiperf.operator.results import ResultsStore
from aiperf.operator.startup import DEFAULT_THRESHOLDS, StartupThresholds
from aiperf.operator.status import RUNNING_SUBPHASES
from aiperf.operator.sweep import SweepReconciler

JOBS = (API_GROUP, API_VERSION, "aiperfjobs")
SWEEPS = (API_GROUP, API_VERSION, "aiperfsweeps")
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")


class _Holder:
    """The running operator's client and reconciler, set by the startup handler. `use()` lends
    the reconciler to one handler call; `close()` refuses new calls, waits for the lent ones to
    return (kopf may still be finishing a timer when its cleanup runs), then closes the client."""

    def __init__(self) -> None:
        self.api: ApiClient | None = None
        self.reconciler: JobReconciler | None = None
        self.sweeps: SweepReconciler | None = None
        self._busy = 0
        self._idle: asyncio.Event | None = None

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[JobReconciler]:
        if self.reconciler is None:
            raise kopf.TemporaryError("the operator is starting or stopping", delay=1)
        self._busy += 1
        try:
            yield self.reconciler
        finally:
            self._busy -= 1
            if self._busy == 0 and self._idle is not None:
                self._idle.set()

    async def close(self, timeout: float) -> None:
        api, self.api, self.reconciler, self.sweeps = self.api, None, None, None
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


def build_registry(*, connect: Callable[[], Awaitable[ApiClient]], defaults: Defaults, metrics: Metrics,
                   resync_interval: float = 30.0, retry_delay: float = 5.0,
                   thresholds: StartupThresholds = DEFAULT_THRESHOLDS,
                   clock: Callable[[], datetime] = utc_now,
                   results: ResultsStore | None = None) -> kopf.OperatorRegistry:
    """The operator's handlers (see the module doc) in a new registry; `thresholds`, `clock` and
    `results` (the results volume finished runs are copied to) go to the reconciler."""
    registry = kopf.OperatorRegistry()
    holder = _Holder()

    async def counted(handler: str, work: Callable[[JobReconciler], Awaitable[None]]) -> None:
        try:
            async with holder.use() as reconciler:
                await work(reconciler)
        except BaseException:
            metrics.failed(handler)
            raise
        metrics.reconciled(handler)

    @kopf.on.startup(registry=registry)
    async def open_client(**_: Any) -> None:
        holder.api = await connect()
        holder.reconciler = JobReconciler(api=holder.api, defaults=defaults, metrics=metrics,
                                          retry_delay=retry_delay, thresholds=thresholds, clock=clock,
                                          results=results)
        holder.sweeps = SweepReconciler(api=holder.api, jobs=holder.reconciler, defaults=defaults, clock=clock,
                                        retry_delay=retry_delay, results=results)

    @kopf.on.cleanup(registry=registry)
    async def close_client(**_: Any) -> None:
        await holder.close(timeout=CLOSE_TIMEOUT_S)

    @kopf.on.create(*JOBS, id="create", registry=registry)
    async def on_create(body: kopf.Body, **_: Any) -> None:
        await counted("create", lambda r: r.create(_plain(body)))

    @kopf.on.delete(*JOBS, id="delete", registry=registry)
    async def on_delete(body: kopf.Body, **_: Any) -> None:
        await counted("delete", lambda r: r.deleted(_plain(body)))

    @kopf.on.update(*JOBS, field="spec.cancel", id="cancel", registry=registry)
    async def on_cancel(body: kopf.Body, **_: Any) -> None:
        await counted("cancel", lambda r: r.cancel(_plain(body)))

    @kopf.on.update(*JOBS, field="spec.timeoutSeconds", id="timeout", registry=registry)
    async def on_timeout(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        async def work(r: JobReconciler) -> None:
            await r.acknowledge(str(namespace), name, uid)
            await r.sync(str(namespace), name, uid)
        await counted("timeout", work)

    @kopf.on.event(*JOBS, id="subphase", when=_controller_is_running, registry=registry)
    async def on_subphase(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        await counted("subphase", lambda r: r.sync(str(namespace), name, uid))

    @kopf.on.resume(*JOBS, id="resume", registry=registry)
    async def on_resume(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        await counted("resume", lambda r: r.sync(str(namespace), name, uid))

    @kopf.timer(*JOBS, id="resync", interval=resync_interval, registry=registry)
    async def on_timer(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        await counted("resync", lambda r: r.sync(str(namespace), name, uid))

    @kopf.on.event(*JOBSETS, id="jobset", labels={APP_LABEL: APP_LABEL_VALUE}, registry=registry)
    async def on_jobset(body: kopf.Body, **_: Any) -> None:
        await counted("jobset", lambda r: r.jobset_event(_plain(body)))

    async def sweeping(handler: str, work: Callable[[SweepReconciler], Awaitable[None]]) -> None:
        async def run(reconciler: JobReconciler) -> None:
            if holder.sweeps is None:
                raise kopf.TemporaryError("the operator is starting or stopping", delay=1)
            await work(holder.sweeps)
        await counted(handler, run)

    @kopf.on.create(*SWEEPS, id="sweep-create", registry=registry)
    async def on_sweep_create(body: kopf.Body, **_: Any) -> None:
        await sweeping("sweep-create", lambda s: s.create(_plain(body)))

    @kopf.on.update(*SWEEPS, field="spec.cancel", id="sweep-cancel", registry=registry)
    async def on_sweep_cancel(body: kopf.Body, **_: Any) -> None:
        await sweeping("sweep-cancel", lambda s: s.cancel(_plain(body)))

    @kopf.on.update(*SWEEPS, field="spec.ttlSecondsAfterFinished", id="sweep-ttl", registry=registry)
    async def on_sweep_ttl(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        async def work(s: SweepReconciler) -> None:
            await s.acknowledge(str(namespace), name, uid)
            await s.sync(str(namespace), name, uid)
        await sweeping("sweep-ttl", work)

    @kopf.on.event(*SWEEPS, id="sweep-aggregated", when=_aggregate_ready, registry=registry)
    async def on_sweep_aggregated(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        await sweeping("sweep-aggregated", lambda s: s.sync(str(namespace), name, uid))

    @kopf.on.resume(*SWEEPS, id="sweep-resume", registry=registry)
    async def on_sweep_resume(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        await sweeping("sweep-resume", lambda s: s.sync(str(namespace), name, uid))

    @kopf.timer(*SWEEPS, id="sweep-resync", interval=resync_interval, registry=registry)
    async def on_sweep_timer(namespace: str | None, name: str, uid: str, **_: Any) -> None:
        await sweeping("sweep-resync", lambda s: s.sync(str(namespace), name, uid))

    @kopf.on.delete(*SWEEPS, id="sweep-delete", registry=registry)
    async def on_sweep_delete(body: kopf.Body, **_: Any) -> None:
        await sweeping("sweep-delete", lambda s: s.delete(_plain(body)))

    @kopf.on.event(*JOBS, id="sweep-child", when=_sweep_child, registry=registry)
    async def on_sweep_child(body: kopf.Body, type: str | None, **_: Any) -> None:  # noqa: A002 - kopf's name
        if type == "DELETED":
            return
        await sweeping("sweep-child", lambda s: s.child_event(_plain(body)))

    return registry


def _aggregate_ready(status: kopf.Status, **_: Any) -> bool:
    """The sweep-controller has written the aggregate and the sweep is not finished."""
    return (status.get("aggregation") or {}).get("phase") in ("Complete", "Failed") and status.get("phase") not in (
        JobPhase.COMPLETED.value, JobPhase.FAILED.value, JobPhase.CANCELLED.value)


def _sweep_child(meta: kopf.Meta, **_: Any) -> bool:
    """An AIPerfJob whose controller owner is an AIPerfSweep."""
    return any(ref.get("controller") and ref.get("kind") == SWEEP_KIND for ref in meta.get("ownerReferences") or [])


def _controller_is_running(status: kopf.Status, **_: Any) -> bool:
    """The run's controller pushed a running `subPhase` while the phase is still Initializing."""
    return status.get("phase") == JobPhase.INITIALIZING.value and status.get("subPhase") in RUNNING_SUBPHASES


def _plain(body: kopf.Body) -> dict[str, Any]:
    """kopf's read-only body view as a plain dict."""
    return {key: _copy(value) for key, value in body.items()}


def _copy(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
