"""Operator mode, from inside the run: a real local profile (every service a process, the real mock
server) whose controller pushes its AIPerfJob status to the fake API server on 127.0.0.1, with
the run's own ServiceAccount token and Role (RBAC enforced), as the controller pod does."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from aiperf.config import (
    Benchmark,
    CommsOptions,
    ConcurrencyPhase,
    Endpoint,
    RunConfig,
    RuntimeOptions,
    ServiceCounts,
    dump_run_config,
)
from aiperf.crd.generator import build_crd
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND
from aiperf.kube import KubeSettings, build_role, build_role_binding, build_service_account
from aiperf.kubeapi import InClusterConfig
from aiperf.kuberun.status_push import HEARTBEAT_ANNOTATION, JobRef
from aiperf.messages import SystemState
from aiperf.mock_server.testing import running_mock
from aiperf.system_controller.job_status import reporting
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.runner import run_system
from aiperf.testing.fake_kube import FakeKube

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
NS, NAME = "bench", "run"
CR_API = f"{API_GROUP}/{API_VERSION}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def profile_config(tmp_path: Path, url: str) -> tuple[RunConfig, str]:
    phases = [ConcurrencyPhase(name="cache_prime", kind="warmup", concurrency=2, requests=6),
              ConcurrencyPhase(name="steady", kind="profiling", concurrency=4, requests=40)]
    config = RunConfig(
        run_id="js", mode="profile", artifact_dir=str(tmp_path / "artifacts"),
        benchmark=Benchmark(models=["m"], endpoint=Endpoint(urls=[url], type="chat"), phases=phases),
        comms=CommsOptions(ipc_dir=tempfile.mkdtemp(prefix="js-", dir="/tmp"), tcp_bind_host="127.0.0.1"),
        services=ServiceCounts(workers_per_group=2, record_processors_per_group=1),
        runtime=RuntimeOptions(heartbeat_interval_s=0.5, registration_timeout_s=60))
    path = tmp_path / "run_config.json"
    dump_run_config(config, path)
    return config, str(path)


def pushed(kube: FakeKube) -> list[dict[str, Any]]:
    """The `add /status/<key>` values of every status push that landed or not, in order."""
    return [{op["path"].removeprefix("/status/"): op["value"] for op in r.body if op["op"] == "add"}
            for r in kube.requests_for("PATCH") if r.path.endswith("/status")]


async def test_a_local_profile_reports_its_states_phases_and_counts_to_its_cr(tmp_path: Path) -> None:
    async with FakeKube(namespaces=[NS], rbac=True) as kube:
        kube.install_crd(build_crd(JOB_KIND))
        settings = KubeSettings(name=NAME, namespace=NS, total_workers=2, workers_per_pod=2)
        for obj in (build_service_account(settings), build_role(settings), build_role_binding(settings)):
            assert obj is not None
            kube.create(obj)
        uid = kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": NAME, "namespace": NS},
                           "spec": {"benchmark": {"models": ["m"]}}})["metadata"]["uid"]
        kube.set_status(CR_API, JOB_KIND, NS, NAME, {"phase": "Initializing"})
        token = tmp_path / "token"
        token.write_text(kube.token_for(NS, settings.service_account_name))
        env = {e["name"]: e["value"] for e in JobRef(name=NAME, namespace=NS, uid=uid).env()}
        in_cluster = InClusterConfig(server=kube.url, token_path=token, ca_path=None)
        with running_mock("--ttft-ms", "1", "--itl-ms", "1") as mock:
            config, path = profile_config(tmp_path, f"http://127.0.0.1:{mock.port}")
            driver = ProfileDriver(config=config)
            async with reporting(config, env, kube=in_cluster) as tracker:
                assert tracker is not None
                verdict = await run_system(config, config_path=path, driver=driver, tracker=tracker)
                tracker.finish(verdict, driver.outcome)
        assert verdict.state is SystemState.DONE, verdict.reason
        cr = kube.get(CR_API, JOB_KIND, NS, NAME)
    assert cr is not None
    history = pushed(kube)
    states = [p["subPhase"] for p in history]
    order = list(SystemState)
    assert states == sorted(states, key=order.index), states  # pokes coalesce, never reorder
    assert states[0] == "initializing" and states[-1] == "done" and {"configuring", "profiling"} <= set(states)
    assert all(p["currentPhase"] in p["phases"] for p in history if "currentPhase" in p)
    status = cr["status"]
    assert status["phase"] == "Initializing" and status["subPhase"] == "done" and status["resultsExported"] is True
    assert status["currentPhase"] == "steady" and set(status["phases"]) == {"cache_prime", "steady"}
    steady, warmup = status["phases"]["steady"], status["phases"]["cache_prime"]
    assert (steady["phaseKind"], steady["phaseIndex"], steady["profilingIndex"]) == ("profiling", 1, 0)
    assert (warmup["phaseKind"], warmup["phaseIndex"]) == ("warmup", 0)
    assert steady["requestsCompleted"] == steady["requestsTotal"] == steady["requestsSent"] == 40
    assert warmup["requestsCompleted"] == 6 and steady["requestsPerSecond"] > 0
    assert (status["requestsCompleted"], status["requestsTotal"], status["progressPercent"]) == (40, 40, 100.0)
    assert status["workers"] == {"ready": 2, "total": 2, "dispatchable": 2, "routerConnected": 2,
                                 "readyRecordProcessors": 1, "declaredRecordProcessors": 1, "readyPods": 1,
                                 "totalPods": 1, "degradedPods": 0}
    assert "controllerFailure" not in status
    assert HEARTBEAT_ANNOTATION in cr["metadata"]["annotations"]
    assert all(r.path.startswith(JobRef(NAME, NS, uid).path()) for r in kube.requests_for())
