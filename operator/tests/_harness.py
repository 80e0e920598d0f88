"""Test helpers: a running operator (real kopf) on a FakeKube, AIPerfJob bodies, and views of
what the fake stores (imported as a top-level test module)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND
from aiperf.kubeapi import JOBSETS, KubeApi, connect
from aiperf.operator.desired import Defaults
from aiperf.operator.handlers import build_registry, tune
from aiperf.operator.metrics import Metrics
from aiperf.operator.reconciler import utc_now
from aiperf.operator.results import ResultsStore
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_kopf import KopfOnFakeKube, fast_settings

NS = "bench"
CR_API = f"{API_GROUP}/{API_VERSION}"
RESYNC_S = 0.3


def benchmark(**runtime: Any) -> dict[str, Any]:
    """A small valid benchmark body."""
    return {"models": ["m"], "endpoint": {"urls": ["http://llm.example:8000"], "type": "chat"},
            "datasets": [{"type": "synthetic", "entries": 4, "prompts": {"isl": {"mean": 16}, "osl": {"mean": 8}}}],
            "phases": [{"type": "concurrency", "name": "profiling", "concurrency": 2, "requests": 10}],
            "runtime": {"workers": 2, "workersPerPod": 1, **runtime}}


def job(name: str = "run", **spec: Any) -> dict[str, Any]:
    """An AIPerfJob body in namespace `bench`."""
    return {"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": name, "namespace": NS},
            "spec": {"benchmark": benchmark(), **spec}}


@asynccontextmanager
async def operator(kube: FakeKube, metrics: Metrics | None = None, *, resync_interval: float = RESYNC_S,
                   token: str | None = None, clock: Callable[[], datetime] = utc_now,
                   results_dir: Path | None = None) -> AsyncIterator[Metrics]:
    """kopf serving the operator's registry against `kube` while entered; yields its metrics.
    `token`: the bearer token of kopf and of the operator's client (default: the fake's admin);
    `clock`: the reconciler's wall clock; `results_dir`: the operator's results volume (None:
    runs end with their JobSet, no copy)."""
    metrics = metrics or Metrics()
    kubeconfig = kube.kubeconfig_path
    if token is not None:
        kubeconfig = str(kube.write_kubeconfig(Path(kube.kubeconfig_path).with_name("operator"), token=token))

    async def connect_api() -> KubeApi:
        return await connect(kubeconfig, None)

    registry = build_registry(connect=connect_api, defaults=Defaults(), metrics=metrics,
                              resync_interval=resync_interval, retry_delay=0.3, clock=clock,
                              results=ResultsStore(results_dir) if results_dir is not None else None)
    async with KopfOnFakeKube(kube, registry=registry, namespaces=[NS], settings=tune(fast_settings()), token=token):
        yield metrics


def cr(kube: FakeKube, name: str = "run") -> dict[str, Any]:
    """The stored AIPerfJob (empty when absent)."""
    return kube.get(CR_API, JOB_KIND, NS, name) or {}


def phase(kube: FakeKube, name: str = "run") -> str | None:
    """Its status.phase."""
    return (cr(kube, name).get("status") or {}).get("phase")


def condition(kube: FakeKube, type_: str, name: str = "run") -> dict[str, Any]:
    """Its condition `type_` (empty when absent)."""
    for c in (cr(kube, name).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


def jobset(kube: FakeKube, name: str = "run") -> dict[str, Any] | None:
    """The run's stored JobSet."""
    return kube.get(JOBSETS.api_version, "JobSet", NS, f"aiperf-{name}")


def set_jobset_status(kube: FakeKube, name: str, *, ready: int | None = None, condition: str | None = None,
                      controller: bool = True) -> None:
    """Play the JobSet controller: every replicated job `ready` pods, or a terminal condition.
    With every pod ready (`ready` None, no condition) and `controller`, also play the run's
    controller taking over: every worker dispatch-ready, the profiling phase started."""
    js = jobset(kube, name)
    assert js is not None
    status: dict[str, Any] = {"replicatedJobsStatus": [
        {"name": rj["name"], "ready": rj.get("replicas", 1) if ready is None else ready, "succeeded": 0,
         "failed": 0, "active": rj.get("replicas", 1), "suspended": 0} for rj in js["spec"]["replicatedJobs"]]}
    if condition is not None:
        status["conditions"] = [{"type": condition, "status": "True", "reason": f"AllJobs{condition}",
                                 "message": f"jobset {condition.lower()}",
                                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        status["terminalState"] = condition
    kube.set_status(JOBSETS.api_version, "JobSet", NS, f"aiperf-{name}", status)
    if ready is None and condition is None and controller:
        controller_profiling(kube, name)


def controller_profiling(kube: FakeKube, name: str = "run", *, kind: str = "profiling") -> None:
    """Play the run's controller push: its workers all dispatch-ready (the takeover of
    status.workers), `subPhase` profiling, and phase `kind` (profiling or warmup) started."""
    current = dict(cr(kube, name).get("status") or {})
    total = int((current.get("workers") or {}).get("total") or 2)
    phase_name = "profiling" if kind == "profiling" else "warmup"
    kube.set_status(CR_API, JOB_KIND, NS, name, {
        **current, "subPhase": "profiling", "currentPhase": phase_name,
        "phases": {**(current.get("phases") or {}), phase_name: {
            "phaseName": phase_name, "phaseKind": kind, "phaseIndex": 0 if kind == "warmup" else 1}},
        "workers": {"ready": total, "total": total, "dispatchable": total, "routerConnected": total,
                    "readyRecordProcessors": 1, "declaredRecordProcessors": 1, "readyPods": total,
                    "totalPods": total, "degradedPods": 0}})
