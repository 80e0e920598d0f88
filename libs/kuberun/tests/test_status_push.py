"""The controller's status push: the patch builder (pure), and a `StatusReporter` against the fake
API server checking RBAC with the run's own ServiceAccount token and Role."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from aiperf.crd.generator import build_crd
from aiperf.crd.model import (
    API_GROUP,
    API_VERSION,
    JOB_KIND,
    AIPerfJobStatus,
    ControllerFailure,
    PhaseStatus,
    WorkersStatus,
)
from aiperf.kube import KubeSettings, build_role, build_role_binding, build_service_account
from aiperf.kubeapi import ApiError, InClusterConfig, InClusterError, KubeApi, in_cluster
from aiperf.kuberun.status_push import (
    HEARTBEAT_ANNOTATION,
    JobRef,
    StatusReporter,
    encode_status,
    heartbeat_ops,
    status_ops,
)
from aiperf.messages import SystemState
from aiperf.testing.fake_kube import FakeKube

NS, NAME = "bench", "run"
CR_API = f"{API_GROUP}/{API_VERSION}"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def snapshot(state: SystemState = SystemState.PROFILING, **extra: Any) -> AIPerfJobStatus:
    phase = PhaseStatus(phase_name="main", phase_kind="profiling", phase_index=0, profiling_index=0,
                        requests_completed=40, requests_total=100, requests_per_second=8.0)
    return AIPerfJobStatus(sub_phase=state, current_phase="main", phases={"main": phase},
                           workers=WorkersStatus(ready=2, total=2, total_pods=1), requests_completed=40,
                           requests_total=100, requests_per_second=8.0, **extra)


# -- the patch builder -------------------------------------------------------------------------

def test_a_push_tests_the_uid_and_the_phase_read_then_adds_each_controller_key() -> None:
    cr = {"metadata": {"uid": "u1"}, "status": {"phase": "Running", "conditions": []}}
    ops = status_ops(cr, snapshot(), uid="u1")
    assert ops[:2] == [{"op": "test", "path": "/metadata/uid", "value": "u1"},
                       {"op": "test", "path": "/status/phase", "value": "Running"}]
    added = {op["path"]: op["value"] for op in ops[2:]}
    assert all(op["op"] == "add" for op in ops[2:])
    assert added["/status/subPhase"] == "profiling" and added["/status/currentPhase"] == "main"
    assert added["/status/phases"]["main"] == {
        "phaseName": "main", "phaseKind": "profiling", "phaseIndex": 0, "profilingIndex": 0,
        "requestsCompleted": 40, "requestsTotal": 100, "requestsPerSecond": 8.0}
    assert added["/status/workers"] == {"ready": 2, "total": 2, "totalPods": 1}
    assert "/status/phase" not in added and "/status/conditions" not in added


def test_before_any_phase_no_phase_test_and_a_missing_status_must_still_be_missing() -> None:
    ops = status_ops({"metadata": {"uid": "u1"}, "status": {}}, snapshot(), uid="u1")
    assert [op["path"] for op in ops if op["op"] == "test"] == ["/metadata/uid"]
    ops = status_ops({"metadata": {"uid": "u1"}}, snapshot(), uid="u1")
    assert ops[1:3] == [{"op": "test", "path": "/status", "value": None}, {"op": "add", "path": "/status", "value": {}}]


def test_the_snapshot_may_hold_only_controller_keys_and_a_current_phase_it_has() -> None:
    with pytest.raises(ValueError, match="does not write status keys phase"):
        encode_status(AIPerfJobStatus(phase="Running"))
    with pytest.raises(ValueError, match="currentPhase 'warmup' is not a key of phases"):
        encode_status(AIPerfJobStatus(current_phase="warmup"))
    done = encode_status(AIPerfJobStatus(sub_phase=SystemState.FAILED, results_exported=False,
                                         controller_failure=ControllerFailure(message="boom")))
    assert done == {"subPhase": "failed", "controllerFailure": {"message": "boom"}, "resultsExported": False}


def test_the_heartbeat_is_uid_fenced_and_keeps_other_annotations() -> None:
    ops = heartbeat_ops({"metadata": {"uid": "u1", "annotations": {"a": "b"}}}, uid="u1", now=NOW)
    assert ops == [{"op": "test", "path": "/metadata/uid", "value": "u1"},
                   {"op": "add", "path": "/metadata/annotations/aiperf.nvidia.com~1controller-heartbeat",
                    "value": "2026-01-02T03:04:05Z"}]
    ops = heartbeat_ops({"metadata": {"uid": "u1"}}, uid="u1", now=NOW)
    assert ops[1:] == [{"op": "test", "path": "/metadata/annotations", "value": None},
                       {"op": "add", "path": "/metadata/annotations",
                        "value": {HEARTBEAT_ANNOTATION: "2026-01-02T03:04:05Z"}}]


def test_the_cr_is_named_by_all_three_variables_or_none() -> None:
    ref = JobRef(name=NAME, namespace=NS, uid="u1")
    assert JobRef.from_env({e["name"]: e["value"] for e in ref.env()}) == ref
    assert JobRef.from_env({"HOME": "/root"}) is None
    with pytest.raises(InClusterError, match="AIPERF_JOB_UID not set"):
        JobRef.from_env({"AIPERF_JOB_NAME": NAME, "AIPERF_JOB_NAMESPACE": NS})
    assert ref.path(status=True) == "/apis/aiperf.nvidia.com/v1alpha1/namespaces/bench/aiperfjobs/run/status"


def test_in_cluster_config_is_the_pods_env_token_and_ca(tmp_path: Path) -> None:
    with pytest.raises(InClusterError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"):
        InClusterConfig.from_env({}, sa_dir=tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(InClusterError, match="no ServiceAccount token"):
        InClusterConfig.from_env(env, sa_dir=tmp_path)
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("c")
    config = InClusterConfig.from_env(env, sa_dir=tmp_path)
    assert config == InClusterConfig(server="https://[fd00::1]:443", token_path=tmp_path / "token",
                                     ca_path=tmp_path / "ca.crt")


# -- against the fake API server, as the run's ServiceAccount ----------------------------------

@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Cluster:
    kube: FakeKube
    uid: str
    token_path: Path

    def cr(self) -> dict[str, Any]:
        return self.kube.get(CR_API, JOB_KIND, NS, NAME) or {}

    def status(self) -> dict[str, Any]:
        return dict(self.cr().get("status") or {})

    def reporter(self, client: KubeApi, *, uid: str | None = None, name: str = NAME,
                 state: list[AIPerfJobStatus] | None = None, interval_s: float = 3600) -> StatusReporter:
        """A reporter of the newest entry of `state` (pushes only when told, unless `interval_s`)."""
        held = state if state is not None else [snapshot()]
        return StatusReporter(client=client, job=JobRef(name=name, namespace=NS, uid=uid or self.uid),
                              snapshot=lambda: held[-1], interval_s=interval_s, clock=lambda: NOW)

    def client(self) -> KubeApi:
        return in_cluster(InClusterConfig(server=self.kube.url, token_path=self.token_path, ca_path=None))


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """The CRD, the run's ServiceAccount, Role and RoleBinding (as the operator creates them), an
    AIPerfJob in phase Running, and the ServiceAccount's token where a pod has it."""
    async with FakeKube(namespaces=[NS], rbac=True) as kube:
        kube.install_crd(build_crd(JOB_KIND))
        settings = KubeSettings(name=NAME, namespace=NS, total_workers=2, workers_per_pod=1)
        for obj in (build_service_account(settings), build_role(settings), build_role_binding(settings)):
            assert obj is not None
            kube.create(obj)
        created = kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": NAME, "namespace": NS},
                               "spec": {"benchmark": {"models": ["m"]}}})
        kube.set_status(CR_API, JOB_KIND, NS, NAME, {"phase": "Running"})
        token = tmp_path / "token"
        token.write_text(kube.token_for(NS, settings.service_account_name) + "\n")
        yield Cluster(kube=kube, uid=created["metadata"]["uid"], token_path=token)


@pytest.mark.anyio
async def test_pushes_land_with_the_runs_own_token_fenced_as_promised(cluster: Cluster) -> None:
    async with cluster.client() as client:
        assert await cluster.reporter(client).push() is True
    status = cluster.status()
    assert status["phase"] == "Running" and status["subPhase"] == "profiling" and status["currentPhase"] == "main"
    assert status["phases"]["main"]["requestsCompleted"] == 40 and status["workers"]["totalPods"] == 1
    assert status["requestsCompleted"] == 40 and status["requestsTotal"] == 100
    assert cluster.cr()["metadata"]["annotations"][HEARTBEAT_ANNOTATION] == "2026-01-02T03:04:05Z"
    status_patch, heartbeat = cluster.kube.requests_for("PATCH")
    assert status_patch.path.endswith("/aiperfjobs/run/status") and heartbeat.path.endswith("/aiperfjobs/run")
    assert status_patch.content_type == heartbeat.content_type == "application/json-patch+json"
    assert status_patch.body[:2] == [{"op": "test", "path": "/metadata/uid", "value": cluster.uid},
                                     {"op": "test", "path": "/status/phase", "value": "Running"}]


@pytest.mark.anyio
async def test_a_stale_push_after_completion_is_dropped_and_subphase_stays_absent(cluster: Cluster) -> None:
    async with cluster.client() as client:
        reporter = cluster.reporter(client)
        assert await reporter.push() is True  # it now holds the CR as Running
        # the operator ends the run: phase Completed, subPhase and currentPhase cleared
        final = {k: v for k, v in cluster.status().items() if k not in ("subPhase", "currentPhase")}
        cluster.kube.set_status(CR_API, JOB_KIND, NS, NAME, {**final, "phase": "Completed"})
        with structlog.testing.capture_logs() as logs:
            assert await reporter.push() is False
    assert reporter.finished
    status = cluster.status()
    assert status["phase"] == "Completed" and "subPhase" not in status and "currentPhase" not in status
    refused = cluster.kube.requests_for("PATCH")[-1]  # the stale push was sent and refused by its test
    assert refused.path.endswith("/status") and {"op": "test", "path": "/status/phase", "value": "Running"} in refused.body
    assert [e["event"] for e in logs if e["log_level"] in ("warning", "error")] == []
    assert any(e["event"] == "status.lost_race" and e["log_level"] == "debug" for e in logs)


@pytest.mark.anyio
async def test_a_phase_moved_by_the_operator_is_reread_and_the_push_lands(cluster: Cluster) -> None:
    cluster.kube.set_status(CR_API, JOB_KIND, NS, NAME, {"phase": "Initializing"})
    async with cluster.client() as client:
        reporter = cluster.reporter(client)
        assert await reporter.push() is True
        cluster.kube.set_status(CR_API, JOB_KIND, NS, NAME, {**cluster.status(), "phase": "Running"})
        assert await reporter.push() is True
    assert cluster.status()["phase"] == "Running" and cluster.status()["subPhase"] == "profiling"


@pytest.mark.anyio
async def test_a_rejection_other_than_a_lost_race_is_logged_with_its_body_and_raised(cluster: Cluster) -> None:
    bad = [AIPerfJobStatus(sub_phase=SystemState.PROFILING, requests_per_second=-1.0)]  # the CRD says >= 0
    async with cluster.client() as client:
        reporter = cluster.reporter(client, state=bad)
        with structlog.testing.capture_logs() as logs, pytest.raises(ApiError) as exc:
            await reporter.push()
    assert exc.value.status == 422 and not exc.value.lost_race and "requestsPerSecond" in exc.value.body
    (event,) = (e for e in logs if e["event"] == "status.rejected")
    assert event["log_level"] == "error" and event["body"] == exc.value.body and event["status"] == 422
    assert "subPhase" not in cluster.status() and not reporter.finished


@pytest.mark.anyio
async def test_the_roles_resource_names_hold_another_cr_is_forbidden(cluster: Cluster) -> None:
    cluster.kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": "other", "namespace": NS},
                         "spec": {"benchmark": {"models": ["m"]}}})
    async with cluster.client() as client:
        with pytest.raises(ApiError) as exc:
            await cluster.reporter(client, name="other").push()
    assert exc.value.status == 403


@pytest.mark.anyio
async def test_a_cr_recreated_under_the_same_name_is_never_written(cluster: Cluster) -> None:
    async with cluster.client() as client:
        reporter = cluster.reporter(client, uid="an-older-incarnation")
        assert await reporter.push() is False
    assert reporter.finished and "subPhase" not in cluster.status() and cluster.kube.requests_for("PATCH") == []


@pytest.mark.anyio
async def test_run_pushes_on_every_poke_and_ends_when_the_run_is_over(cluster: Cluster) -> None:
    held = [snapshot(SystemState.CONFIGURING)]
    async with cluster.client() as client:
        reporter = cluster.reporter(client, state=held)  # after the first push, only pokes push
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:  # left once `run` returns by itself
                await tg.start(reporter.run)
                await cluster.kube.wait_until(lambda: cluster.status().get("subPhase") == "configuring")
                held.append(snapshot(SystemState.PROFILING))
                reporter.poke()
                await cluster.kube.wait_until(lambda: cluster.status().get("subPhase") == "profiling")
                cluster.kube.set_status(CR_API, JOB_KIND, NS, NAME, {"phase": "Cancelled"})
                held.append(snapshot(SystemState.CANCELLED))
                reporter.poke()
        assert reporter.finished and await reporter.flush() is False
    assert cluster.status() == {"phase": "Cancelled"}


def _refusal(status: int, reason: str, message: str) -> ApiError:
    return ApiError(status, json.dumps({"kind": "Status", "status": "Failure", "code": status,
                                           "reason": reason, "message": message}))


LOST_RACE = ApiError(422, json.dumps({"reason": "Invalid", "message": "the request is invalid",
                                         "details": {"causes": [{"message": "testing value /status/phase failed"}]}}))
"""What a status write of the operator in between makes the API server say to a fenced push."""


class _Refuses:
    """The real client, but its first status PATCHes answer `refusals`, one each."""

    def __init__(self, client: KubeApi, refusals: list[ApiError]) -> None:
        self._client, self.refusals = client, list(refusals)

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if method == "PATCH" and path.endswith("/status") and self.refusals:
            raise self.refusals.pop(0)
        return await self._client.request(method, path, **kwargs)


@pytest.mark.anyio
async def test_the_final_push_is_tried_again_until_it_lands_within_its_deadline(cluster: Cluster) -> None:
    async with cluster.client() as client:
        racing = _Refuses(client, [LOST_RACE] * 7)  # more than one push's attempts (3)
        reporter = StatusReporter(client=racing, job=JobRef(name=NAME, namespace=NS, uid=cluster.uid),
                                  snapshot=lambda: snapshot(SystemState.DONE), clock=lambda: NOW)
        assert await reporter.push() is False  # dropped after its attempts
        assert await reporter.flush(timeout_s=30, retry_s=0.01) is True
    assert racing.refusals == [] and cluster.status()["subPhase"] == "done"
    assert cluster.status()["phases"]["main"]["requestsCompleted"] == 40


@pytest.mark.anyio
async def test_the_final_push_outlasts_an_api_server_that_says_not_now(cluster: Cluster) -> None:
    """Throttling (429) and server errors (5xx) pass: the final counts still land. A refusal that
    is no passing trouble (here the CRD's schema) ends the flush at once."""
    busy = [_refusal(429, "TooManyRequests", "too many requests, please try again later"),
            _refusal(500, "InternalError", "Internal error occurred: etcdserver: leader changed"),
            _refusal(503, "ServiceUnavailable", "the server is currently unable to handle the request")]
    assert all(r.transient and not r.lost_race for r in busy) and not LOST_RACE.transient
    async with cluster.client() as client:
        flaky = _Refuses(client, busy)
        reporter = StatusReporter(client=flaky, job=JobRef(name=NAME, namespace=NS, uid=cluster.uid),
                                  snapshot=lambda: snapshot(SystemState.DONE), clock=lambda: NOW)
        with structlog.testing.capture_logs() as logs:
            assert await reporter.flush(timeout_s=30, retry_s=0.01) is True
        assert flaky.refusals == [] and cluster.status()["subPhase"] == "done"
        assert {e["log_level"] for e in logs if e["event"] == "status.rejected"} == {"warning"}

        bad = [AIPerfJobStatus(sub_phase=SystemState.DONE, requests_per_second=-1.0)]  # the CRD says >= 0
        invalid = cluster.reporter(client, state=bad)
        assert await invalid.flush(timeout_s=30, retry_s=0.01) is False
    sent = {"op": "add", "path": "/status/requestsPerSecond", "value": -1.0}
    assert len([r for r in cluster.kube.requests_for("PATCH") if sent in r.body]) == 1  # not tried again
