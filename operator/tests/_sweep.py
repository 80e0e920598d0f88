"""Test helpers for AIPerfSweeps on a FakeKube: sweep bodies, summaries with known metrics, the
kubelet's and JobSet controller's part for a child run and for the sweep-controller pod, and an
in-process sweep-controller (imported as a top-level test module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _harness import CR_API, NS, benchmark, phase, set_jobset_status

from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.kube.names import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from aiperf.kubeapi import KubeApi
from aiperf.kuberun.sweeps import SummarySource
from aiperf.sweep_controller.controller import SweepController
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_sidecar import FakeSidecar

NAME = "sw"


def sweep(name: str = NAME, *, values: tuple[int, ...] = (2, 4), **spec: Any) -> dict[str, Any]:
    """An AIPerfSweep of `len(values)` variations of the profiling concurrency, one trial each."""
    return {"apiVersion": CR_API, "kind": SWEEP_KIND, "metadata": {"name": name, "namespace": NS},
            "spec": {"benchmark": benchmark(),
                     "sweep": {"parameters": {"phases.profiling.concurrency": list(values)}, "sameSeed": True},
                     **spec}}


def summary(concurrency: int) -> dict[str, Any]:
    """A run summary whose throughput and p99 latency grow with `concurrency`."""
    return {"request_throughput": {"unit": "requests/sec", "avg": 10.0 * concurrency},
            "request_latency": {"unit": "ms", "avg": 50.0 * concurrency, "p99": 80.0 * concurrency}}


def sweep_cr(kube: FakeKube, name: str = NAME) -> dict[str, Any]:
    """The stored AIPerfSweep (empty when absent)."""
    return kube.get(CR_API, SWEEP_KIND, NS, name) or {}


def sweep_status(kube: FakeKube, name: str = NAME) -> dict[str, Any]:
    return sweep_cr(kube, name).get("status") or {}


def child(kube: FakeKube, name: str) -> dict[str, Any]:
    return kube.get(CR_API, JOB_KIND, NS, name) or {}


async def finish_child(kube: FakeKube, name: str, concurrency: int) -> FakeSidecar:
    """Play the child run `name` to its end: JobSet ready, controller pod up with a results
    sidecar holding its summary, control plane exits 0; returns the sidecar."""
    await kube.wait_until(lambda: phase(kube, name) == "Initializing", timeout=20)
    set_jobset_status(kube, name)
    await kube.wait_until(lambda: phase(kube, name) == "Running")
    pod = f"aiperf-{name}-controller-0-0-abcde"
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        JOBSET_NAME_LABEL: f"aiperf-{name}", REPLICATED_JOB_LABEL: "controller"}},
        "spec": {"containers": [{"name": "control-plane", "image": "x"},
                                {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod(NS, pod)
    files = {"profile_export_aiperf.json": json.dumps(summary(concurrency)).encode(), "inputs.json": b"{}"}
    fake = FakeSidecar(files, kube=kube, namespace=NS, pod=pod)
    kube.register_proxy(NS, pod, 9091, fake)
    kube.end_container(NS, pod, "control-plane", 0)
    return fake


def sweep_pod(kube: FakeKube, files: dict[str, bytes], name: str = NAME) -> FakeSidecar:
    """The sweep-controller pod of `name` running, its results sidecar serving `files`."""
    pod = f"aiperf-sweep-{name}-ctl-0-0-xyz"
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        JOBSET_NAME_LABEL: f"aiperf-sweep-{name}", REPLICATED_JOB_LABEL: "ctl"}},
        "spec": {"containers": [{"name": "sweep-controller", "image": "x"},
                                {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod(NS, pod)
    kube.end_container(NS, pod, "sweep-controller", 0)
    fake = FakeSidecar(files, kube=kube, namespace=NS, pod=pod)
    kube.register_proxy(NS, pod, 9091, fake)
    return fake


class DictSummaries:
    """Summaries by child name (a `SummarySource` that needs no sidecar)."""

    def __init__(self, by_child: dict[str, dict[str, Any]]) -> None:
        self.by_child = by_child

    async def fetch(self, child: dict[str, Any]) -> dict[str, Any] | None:
        return self.by_child.get(child["metadata"]["name"])


def controller(api: KubeApi, kube: FakeKube, artifact_dir: Path, summaries: SummarySource,
               name: str = NAME) -> SweepController:
    """An in-process sweep-controller for the stored sweep `name`."""
    uid = sweep_cr(kube, name)["metadata"]["uid"]
    return SweepController(api=api, namespace=NS, name=name, uid=uid, artifact_dir=artifact_dir, summaries=summaries,
                           poll_s=0.05)
