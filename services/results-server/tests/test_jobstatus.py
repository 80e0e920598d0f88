"""The job status routes (`aiperf.results_server.jobstatus`) of the real results server under granian on
127.0.0.1, reading AIPerfJobs from the fake Kubernetes API server through kubernetes_asyncio, with
aiohttp as the HTTP and WebSocket client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from anyio.abc import SocketAttribute

from aiperf.crd.generator import build_crd
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND
from aiperf.kubeapi import KubeApi, connect
from aiperf.results.app import ResultsSource
from aiperf.results.index import ResultsIndex
from aiperf.results.local import LocalTree
from aiperf.results_server.jobstatus import JobStatusFeed, snapshot_of
from aiperf.results_server.main import app_over
from aiperf.runtime.http import HttpServer, free_tcp_port
from aiperf.testing.fake_kube import FakeKube

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NS = "bench"
CR_API = f"{API_GROUP}/{API_VERSION}"
NOW = datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC)
DEADLINE_S = 10


def job(name: str = "run") -> dict[str, Any]:
    return {"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": name, "namespace": NS},
            "spec": {"benchmark": {
                "models": ["m"], "endpoint": {"urls": ["http://llm.example:8000"], "type": "chat"},
                "datasets": [{"type": "synthetic", "entries": 4, "prompts": {"isl": {"mean": 16}, "osl": {"mean": 8}}}],
                "phases": [{"type": "concurrency", "name": "profiling", "concurrency": 2, "requests": 10}],
                "runtime": {"workers": 2}}}}


def running(completed: int, *, failed: int = 0, phase: str = "Running") -> dict[str, Any]:
    """A status as the operator and the run's controller write it."""
    return {"phase": phase, "subPhase": "profiling", "currentPhase": "profiling",
            "phases": {
                "warmup": {"phaseName": "warmup", "phaseKind": "warmup", "phaseIndex": 0, "requestsCompleted": 2,
                           "requestsTotal": 2, "startTime": "2026-12-01T12:00:00Z", "endTime": "2026-12-01T12:00:01Z"},
                "profiling": {"phaseName": "profiling", "phaseKind": "profiling", "phaseIndex": 1,
                              "requestsSent": completed + 1, "requestsCompleted": completed, "requestsFailed": failed,
                              "requestsTotal": 10, "requestsPerSecond": 2.5, "startTime": "2026-12-01T12:00:02Z"}},
            "workers": {"ready": 2, "total": 2}, "requestsCompleted": completed, "requestsTotal": 10,
            "progressPercent": 10.0 * completed, "runEpoch": "1796149500"}


@dataclass
class Server:
    kube: FakeKube
    feed: JobStatusFeed
    http: HttpServer
    session: aiohttp.ClientSession

    def status(self, name: str, status: dict[str, Any]) -> None:
        self.kube.set_status(CR_API, JOB_KIND, NS, name, status)

    def url(self, path: str) -> str:
        return self.http.url + path

    def ws(self, ns: str, name: str) -> Any:
        return self.session.ws_connect(self.url(f"/api/v1/ws/jobs/{ns}/{name}"))

    def watches(self) -> list[Any]:
        return [r for r in self.kube.requests_for("GET", f"/apis/{API_GROUP}") if r.query.get("watch") == "true"]


@asynccontextmanager
async def results_server(tmp_path: Path, *, rbac: bool = False, max_sockets: int = 8,
                         token: Callable[[FakeKube], str] | None = None,
                         source: ResultsSource | None = None) -> AsyncIterator[Server]:
    async with FakeKube(namespaces=[NS], rbac=rbac) as kube:
        kube.install_crd(build_crd(JOB_KIND))
        kubeconfig = kube.kubeconfig_path
        if token is not None:
            kubeconfig = str(kube.write_kubeconfig(tmp_path / "kubeconfig", token=token(kube)))
        api = await connect(kubeconfig, None)
        async with api, aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
            feed = JobStatusFeed(api=api, max_sockets=max_sockets, clock=lambda: NOW)
            http = HttpServer(app_over(source or LocalTree(tmp_path), feed=feed), host="127.0.0.1", port=0,
                              drain=feed.close)
            await tg.start(http.run)
            yield Server(kube, feed, http, session)
            http.stop()


async def next_json(ws: Any) -> dict[str, Any]:
    with anyio.fail_after(DEADLINE_S):
        msg = await ws.receive()
    assert msg.type == aiohttp.WSMsgType.TEXT, (msg.type, msg.data, msg.extra)
    return dict(msg.json())


async def closed_with(ws: Any) -> tuple[int, str]:
    with anyio.fail_after(DEADLINE_S):
        msg = await ws.receive()
    assert msg.type == aiohttp.WSMsgType.CLOSE, (msg.type, msg.data)
    return int(msg.data), str(msg.extra)


async def until(predicate: Callable[[], bool]) -> None:
    with anyio.fail_after(DEADLINE_S):
        while not predicate():
            await anyio.sleep(0.01)


# -- the snapshot (pure) -------------------------------------------------------------------------

def test_the_snapshot_maps_the_cr_status_to_the_dashboards_progress_shape() -> None:
    obj = {"metadata": {"namespace": NS, "name": "run", "uid": "u1"},
           "status": {**running(3, failed=1), "controllerFailure": {"message": "worker-0 died", "service": "worker"},
                      "startupIssue": {"reason": "ImagePullBackOff", "message": "no such image"}}}
    snap = snapshot_of(obj, now=NOW)
    assert list(snap["progress"]) == ["warmup", "profiling"]  # phase order, not key order
    assert snap["progress"]["profiling"] == {
        "phase": "profiling", "kind": "profiling", "completed": 3, "expected": 10, "errors": 1, "cancelled": 0,
        "sent": 4, "requestsPerSecond": 2.5, "elapsed_s": 8.0}
    assert snap["progress"]["warmup"]["elapsed_s"] == 1.0  # ended: end minus start, whatever `now` is
    assert (snap["jobPhase"], snap["state"], snap["currentPhase"]) == ("Running", "profiling", "profiling")
    assert (snap["progressPercent"], snap["requestsCompleted"], snap["requestsTotal"]) == (30.0, 3, 10)
    assert snap["workers"] == {"ready": 2, "total": 2} and snap["runEpoch"] == "1796149500"
    assert snap["failures"] == ["worker: worker-0 died", "ImagePullBackOff: no such image"]
    assert (snap["namespace"], snap["name"], snap["uid"]) == (NS, "run", "u1")


def test_a_job_without_status_is_pending_with_no_progress() -> None:
    snap = snapshot_of({"metadata": {"namespace": NS, "name": "run"}}, now=NOW)
    assert (snap["jobPhase"], snap["progress"], snap["failures"], snap["workers"]) == ("Pending", {}, [], None)


# -- GET .../status -------------------------------------------------------------------------------

async def test_status_route_answers_the_live_snapshot_404_and_422(tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        srv.status("run", running(3, failed=1))
        async with srv.session.get(srv.url(f"/api/v1/jobs/{NS}/run/status")) as r:
            assert r.status == 200
            body = await r.json()
        assert body["jobPhase"] == "Running" and body["progress"]["profiling"]["completed"] == 3
        assert body["progress"]["profiling"]["errors"] == 1 and body["workers"]["ready"] == 2
        for path, status, words in ((f"{NS}/missing", 404, "no AIPerfJob bench/missing"),
                                    ("Bench/run", 422, "invalid namespace"), (f"{NS}/Run_1", 422, "invalid job name"),
                                    (f"{NS}/{'a' * 254}", 422, "invalid job name")):
            async with srv.session.get(srv.url(f"/api/v1/jobs/{path}/status")) as r:
                assert r.status == status, path
                assert words in (await r.json())["detail"], path


async def test_the_job_list_adds_live_progress_to_jobs_still_going(tmp_path: Path) -> None:
    """Operator volume: `run` is Running (its CR has progress), `gone` Running without a CR
    (listed, no progress), `done` Completed (no progress asked for)."""
    index = ResultsIndex(tmp_path / "volume", keep=3)
    for name, phase in (("run", "Running"), ("gone", "Running"), ("done", "Failed")):
        await index.record_phase(NS, name, "1796149500", uid=f"uid-{name}", phase=phase)
    async with results_server(tmp_path, source=index) as srv:
        srv.kube.create(job("run"))
        srv.status("run", running(4, failed=1))
        srv.kube.create(job("done"))
        srv.status("done", running(10, phase="Failed"))
        async with srv.session.get(srv.url("/api/v1/results")) as r:
            assert r.status == 200
            listed = {j["name"]: j for j in (await r.json())["jobs"]}
    assert listed["run"]["progress"] == {"phase": "profiling", "completed": 4, "expected": 10, "errors": 1}
    assert "progress" not in listed["gone"] and "progress" not in listed["done"], listed
    reads = [r.query.get("fieldSelector") for r in srv.kube.requests_for("GET", f"/apis/{API_GROUP}")]
    assert "metadata.name=done" not in reads, reads


async def test_an_api_server_refusal_is_a_one_line_503(tmp_path: Path) -> None:
    async with results_server(tmp_path, rbac=True, token=lambda kube: kube.token_for(NS, "nobody")) as srv:
        srv.kube.create(job())
        async with srv.session.get(srv.url(f"/api/v1/jobs/{NS}/run/status")) as r:
            body = await r.json()
        assert r.status == 503 and set(body) == {"status_code", "detail"}
        assert "forbidden" in body["detail"].lower() and "\n" not in body["detail"]
        async with srv.ws(NS, "run") as ws:
            code, reason = await closed_with(ws)
        assert code == 1011 and "forbidden" in reason.lower()


async def test_without_an_api_client_the_routes_are_absent_and_the_page_does_not_follow(tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
        http = HttpServer(app_over(LocalTree(tmp_path)), host="127.0.0.1", port=0)
        await tg.start(http.run)
        async with session.get(http.url + f"/api/v1/jobs/{NS}/run/status") as r:
            assert r.status == 404
        async with session.get(http.url + "/dashboard/job") as r:
            page = await r.text()
        assert '"statusUrl": null' in page and '"progressWsUrl": null' in page
        http.stop()


# -- the socket -----------------------------------------------------------------------------------

async def test_socket_sends_a_snapshot_then_one_per_change_from_one_watch_and_closes_when_done(
        tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        srv.status("run", running(3))
        async with srv.ws(NS, "run") as ws:
            first = await next_json(ws)
            assert (first["jobPhase"], first["progress"]["profiling"]["completed"]) == ("Running", 3)
            srv.status("run", running(5))
            assert (await next_json(ws))["progress"]["profiling"]["completed"] == 5
            # A heartbeat (an annotation only) changes no status: nothing is sent for it, so the
            # next message is the next status change.
            live = srv.kube.get(CR_API, JOB_KIND, NS, "run")
            assert live is not None
            srv.kube.update({**live, "metadata": {**live["metadata"], "annotations": {"beat": "1"}}})
            srv.status("run", running(7, failed=2))
            update = await next_json(ws)
            assert (update["progress"]["profiling"]["completed"], update["progress"]["profiling"]["errors"]) == (7, 2)
            srv.status("run", running(10, phase="Completed"))
            assert (await next_json(ws))["jobPhase"] == "Completed"
            assert await closed_with(ws) == (1000, "job Completed")
        watches = srv.watches()
        assert len(watches) == 1 and watches[0].query["fieldSelector"] == "metadata.name=run"
        await until(lambda: srv.feed.open_sockets == 0)


async def test_socket_of_a_finished_job_sends_its_last_snapshot_and_closes(tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        srv.status("run", running(10, phase="Failed"))
        async with srv.ws(NS, "run") as ws:
            assert (await next_json(ws))["jobPhase"] == "Failed"
            assert await closed_with(ws) == (1000, "job Failed")


async def test_socket_closes_4404_4422_for_missing_or_invalid_jobs_and_when_the_job_is_deleted(
        tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        async with srv.ws(NS, "missing") as ws:
            assert await closed_with(ws) == (4404, "no AIPerfJob bench/missing")
        async with srv.ws("Bad_NS", "run") as ws:
            code, reason = await closed_with(ws)
            assert code == 4422 and "invalid namespace" in reason
        srv.kube.create(job())
        async with srv.ws(NS, "run") as ws:
            assert (await next_json(ws))["jobPhase"] == "Pending"
            await _delete(srv, "run")
            assert await closed_with(ws) == (4404, f"AIPerfJob {NS}/run was deleted")


async def _delete(srv: Server, name: str) -> None:
    async with srv.session.delete(srv.kube.url + f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{NS}/aiperfjobs/{name}") as r:
        assert r.status == 200, await r.text()


async def test_a_client_leaving_ends_its_handler_and_the_watch(tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        async with srv.ws(NS, "run") as ws:
            await next_json(ws)
            assert srv.feed.open_sockets == 1
        await until(lambda: srv.feed.open_sockets == 0)


async def test_sockets_are_bounded_and_the_extra_one_is_told_to_poll(tmp_path: Path) -> None:
    async with results_server(tmp_path, max_sockets=1) as srv:
        srv.kube.create(job())
        async with srv.ws(NS, "run") as first:
            await next_json(first)
            async with srv.ws(NS, "run") as second:
                code, reason = await closed_with(second)
            assert code == 1013 and "poll" in reason
            srv.status("run", running(4))
            assert (await next_json(first))["progress"]["profiling"]["completed"] == 4


async def test_stopping_the_server_closes_open_sockets_first(tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        async with srv.ws(NS, "run") as ws:
            await next_json(ws)
            srv.http.stop()
            assert await closed_with(ws) == (1001, "server stopping")
        await until(lambda: srv.feed.open_sockets == 0)  # the handler ends after its close frame


async def test_a_cut_watch_is_reopened_from_where_it_was_and_no_change_is_lost(tmp_path: Path) -> None:
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        srv.status("run", running(1))
        async with srv.ws(NS, "run") as ws:
            await next_json(ws)
            await until(lambda: len(srv.watches()) == 1)
            srv.kube.cut_watches()
            srv.status("run", running(2))
            assert (await next_json(ws))["progress"]["profiling"]["completed"] == 2
        first, second = srv.watches()
        assert int(second.query["resourceVersion"]) >= int(first.query["resourceVersion"])


async def test_a_watch_ended_by_a_504_error_is_followed_by_a_fresh_read(tmp_path: Path) -> None:
    # Issue 23, item 9: any watch ERROR (here the 504 of a lagging apiserver) reads the job again.
    async with results_server(tmp_path) as srv:
        srv.kube.create(job())
        srv.status("run", running(1))
        async with srv.ws(NS, "run") as ws:
            await next_json(ws)
            await until(lambda: len(srv.watches()) == 1)
            assert srv.kube.fail_watches() == 1
            srv.status("run", running(2))
            assert (await next_json(ws))["progress"]["profiling"]["completed"] == 2
            await until(lambda: len(srv.watches()) == 2)


def test_an_unusable_kube_configuration_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from aiperf.results_server.main import run_server

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert run_server(tmp_path, host="127.0.0.1", port=0, in_cluster=True) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --in-cluster: not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set); "
        "use --kubeconfig PATH outside a cluster"]
    assert run_server(tmp_path, host="127.0.0.1", port=0, kubeconfig=str(tmp_path / "nope")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kubeconfig" in err[0] and "not found" in err[0]


async def test_an_api_server_that_does_not_answer_or_cannot_be_reached_is_a_503(tmp_path: Path) -> None:
    from kubernetes_asyncio.client import ApiClient, Configuration

    async def silent(stream: Any) -> None:
        async with stream:
            await anyio.sleep_forever()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    silent_port = listener.extra(SocketAttribute.local_port)
    async with listener, aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, silent)
        for port, words in ((silent_port, "did not answer within 0.3 s"), (free_tcp_port(), "")):
            api = KubeApi.over(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")))
            async with api:
                feed = JobStatusFeed(api=api, read_timeout_s=0.3)
                http = HttpServer(app_over(LocalTree(tmp_path), feed=feed), host="127.0.0.1", port=0)
                async with anyio.create_task_group() as serving:
                    await serving.start(http.run)
                    async with session.get(http.url + f"/api/v1/jobs/{NS}/run/status") as r:
                        body = await r.json()
                    http.stop()
            assert r.status == 503 and words in body["detail"] and "\n" not in body["detail"], body
        tg.cancel_scope.cancel()
