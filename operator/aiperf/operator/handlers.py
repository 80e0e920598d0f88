"""kopf wiring: which events call which `JobReconciler` method. No logic lives here.

`build_registry(connect=..., defaults=..., metrics=...)` returns a `kopf.OperatorRegistry`:
- startup: `connect()` opens the ApiClient (in kopf's own event loop) and builds the reconciler;
  cleanup closes the client;
- AIPerfJob create -> `create`; update of `spec.cancel` -> `cancel`; update of
  `spec.timeoutSeconds` -> `acknowledge` + `sync`; resume (operator restart) and a timer every
  `resync_interval` seconds -> `sync`;
- JobSet events (label `app.kubernetes.io/name=aiperf`) -> `jobset_event`.
The registry has no login handler: the caller adds one (main.py from the kubeconfig or the
pod's ServiceAccount; tests from the fake API server). Every handler counts itself in `metrics`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import kopf
from kubernetes_asyncio.client import ApiClient

from aiperf.kube.crd_model import API_GROUP, API_VERSION
from aiperf.kube.ops import APP_LABEL, APP_LABEL_VALUE
from aiperf.operator.desired import Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.reconciler import JobReconciler

JOBS = (API_GROUP, API_VERSION, "aiperfjobs")
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")


class _Holder:
    """The reconciler of the running operator, set by the startup handler."""

    def __init__(self) -> None:
        self.api: ApiClient | None = None
        self.reconciler: JobReconciler | None = None

    def get(self) -> JobReconciler:
        if self.reconciler is None:
            raise kopf.TemporaryError("the operator is still starting", delay=1)
        return self.reconciler


CANCELLATION_POLLING_S = 1.0
"""How soon kopf re-checks a stopping resync timer of a deleted CR (kopf's default, 60 s, holds
the CR's deletion that long when the timer was busy at the time)."""


def tune(settings: kopf.OperatorSettings) -> kopf.OperatorSettings:
    """`settings` adjusted for these handlers (see `CANCELLATION_POLLING_S`); returned for chaining."""
    settings.background.cancellation_polling = CANCELLATION_POLLING_S
    return settings


def build_registry(*, connect: Callable[[], Awaitable[ApiClient]], defaults: Defaults, metrics: Metrics,
                   resync_interval: float = 30.0, retry_delay: float = 5.0) -> kopf.OperatorRegistry:
    """The operator's handlers (see the module doc) in a new registry."""
    registry = kopf.OperatorRegistry()
    holder = _Holder()

    async def counted(handler: str, work: Awaitable[None]) -> None:
        try:
            await work
        except BaseException:
            metrics.failed(handler)
            raise
        metrics.reconciled(handler)

    @kopf.on.startup(registry=registry)
    async def open_client(**_: Any) -> None:
        holder.api = await connect()
        holder.reconciler = JobReconciler(api=holder.api, defaults=defaults, metrics=metrics,
                                          retry_delay=retry_delay)

    @kopf.on.cleanup(registry=registry)
    async def close_client(**_: Any) -> None:
        if holder.api is not None:
            await holder.api.close()
        holder.api = holder.reconciler = None

    @kopf.on.create(*JOBS, id="create", registry=registry)
    async def on_create(body: kopf.Body, **_: Any) -> None:
        await counted("create", holder.get().create(_plain(body)))

    @kopf.on.update(*JOBS, field="spec.cancel", id="cancel", registry=registry)
    async def on_cancel(body: kopf.Body, **_: Any) -> None:
        await counted("cancel", holder.get().cancel(_plain(body)))

    @kopf.on.update(*JOBS, field="spec.timeoutSeconds", id="timeout", registry=registry)
    async def on_timeout(body: kopf.Body, namespace: str, name: str, uid: str, **_: Any) -> None:
        async def work() -> None:
            await holder.get().acknowledge(namespace, name, uid)
            await holder.get().sync(namespace, name, uid)
        await counted("timeout", work())

    @kopf.on.resume(*JOBS, id="resume", registry=registry)
    async def on_resume(namespace: str, name: str, uid: str, **_: Any) -> None:
        await counted("resume", holder.get().sync(namespace, name, uid))

    @kopf.timer(*JOBS, id="resync", interval=resync_interval, registry=registry)
    async def on_timer(namespace: str, name: str, uid: str, **_: Any) -> None:
        await counted("resync", holder.get().sync(namespace, name, uid))

    @kopf.on.event(*JOBSETS, id="jobset", labels={APP_LABEL: APP_LABEL_VALUE}, registry=registry)
    async def on_jobset(body: kopf.Body, **_: Any) -> None:
        await counted("jobset", holder.get().jobset_event(_plain(body)))

    return registry


def _plain(body: kopf.Body) -> dict[str, Any]:
    """kopf's read-only body view as a plain dict."""
    return {key: _copy(value) for key, value in body.items()}


def _copy(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
