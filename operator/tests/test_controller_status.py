"""The operator and the run's controller write one status side by side: real kopf with the
chart's RBAC, and a `StatusReporter` with the run's own ServiceAccount token (the Role the
operator created), against the fake API server checking every request."""

from __future__ import annotations

from pathlib import Path

import pytest
from _chart import render
from _harness import CR_API, NS, cr, job, operator, phase, set_jobset_status
from _repo import chart_dir

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND, AIPerfJobStatus, PhaseStatus, WorkersStatus
from aiperf.kubeapi import InClusterConfig, in_cluster
from aiperf.kuberun.status_push import JobRef, StatusReporter
from aiperf.messages import SystemState
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio
RELEASE_NS = "aiperf-system"


def pushed(state: SystemState) -> AIPerfJobStatus:
    phase = PhaseStatus(phase_name="profiling", phase_kind="profiling", phase_index=0, requests_completed=3)
    return AIPerfJobStatus(sub_phase=state, current_phase="profiling", phases={"profiling": phase},
                           workers=WorkersStatus(ready=2, total=2, total_pods=2))


async def test_the_controllers_keys_survive_the_operator_and_a_late_push_cannot_revive_subphase(
        tmp_path: Path) -> None:
    async with FakeKube(namespaces=[NS, RELEASE_NS], rbac=True) as kube:
        kube.install_crd(build_crd(JOB_KIND))
        for obj in render(chart_dir(), namespace=RELEASE_NS):
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                kube.create(obj)
        token = tmp_path / "token"
        token.write_text(kube.token_for(NS, "aiperf-run"))  # the run's own ServiceAccount
        held = [pushed(SystemState.CONFIGURING)]
        # no resync timer: only the subPhase push can promote the run
        async with operator(kube, token=kube.token_for(RELEASE_NS, "aiperf-operator"), resync_interval=3600) as metrics, \
                in_cluster(InClusterConfig(server=kube.url, token_path=token, ca_path=None)) as client:
            uid = kube.create(job())["metadata"]["uid"]
            await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
            await kube.wait_until(lambda: metrics.value("reconciles", "create") == 1  # its closing sync, and
                                  and metrics.value("reconciles", "resync") == 1, timeout=20)  # the timer's only run
            env = {e["name"]: e["value"] for c in _controller_containers(kube) for e in c["env"] if "value" in e}
            assert JobRef.from_env(env) == JobRef(name="run", namespace=NS, uid=uid)
            reporter = StatusReporter(client=client, job=JobRef(name="run", namespace=NS, uid=uid),
                                      snapshot=lambda: held[-1])
            assert await reporter.push() is True
            assert phase(kube) == "Initializing" and cr(kube)["status"]["subPhase"] == "configuring"
            held.append(pushed(SystemState.PROFILING))
            assert await reporter.push() is True
            await kube.wait_until(lambda: phase(kube) == "Running", timeout=20)
            status = cr(kube)["status"]
            assert status["workers"] == {"ready": 2, "total": 2, "totalPods": 2}  # the operator left them
            assert status["phases"]["profiling"]["requestsCompleted"] == 3
            set_jobset_status(kube, "run", condition="Completed")
            await kube.wait_until(lambda: phase(kube) == "Completed")
            assert await reporter.push() is False and reporter.finished
        status = cr(kube)["status"]
    assert "subPhase" not in status and "currentPhase" not in status
    assert status["phases"]["profiling"]["requestsCompleted"] == 3 and status["workers"]["totalPods"] == 2


def _controller_containers(kube: FakeKube) -> list[dict]:
    jobset = kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", NS, "aiperf-run")
    assert jobset is not None and kube.get(CR_API, JOB_KIND, NS, "run") is not None
    (controller,) = (rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == "controller")
    containers: list[dict] = controller["template"]["spec"]["template"]["spec"]["containers"]
    return containers
