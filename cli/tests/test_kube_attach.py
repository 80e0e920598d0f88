"""`kube attach` against the fake API server: the progress of a real api service (its Litestar
app on granian, fed events through a memory stream) reached over a WebSocket through the fake's
pods/proxy, the polling fallback when the upgrade is refused, and the end of the run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web

from aiperf.api.service import Api
from aiperf.cli.kube_attach import LineRenderer
from aiperf.cli.kube_runref import resolve
from aiperf.cli.kube_selector import Selector
from aiperf.kubeapi import connect
from aiperf.messages import Event, Phase, Progress, SystemState, SystemStateChanged
from aiperf.runtime.http import granian_server
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_proxy import forward_to

pytestmark = pytest.mark.anyio

NS = "bench"
JS_API = "jobset.x-k8s.io/v1alpha2"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--request-count", "80")
Run = Callable[..., Awaitable[Any]]


class _Events:
    """The api's event source over a memory stream."""

    def __init__(self, receive: anyio.abc.ObjectReceiveStream[Event]) -> None:
        self._receive = receive

    async def recv(self) -> Event:
        return await self._receive.receive()


@asynccontextmanager
async def api_service(tmp_path: Path) -> AsyncIterator[tuple[Api, anyio.abc.ObjectSendStream[Event]]]:
    """A real api service on 127.0.0.1 and the stream that feeds it events."""
    send, receive = anyio.create_memory_object_stream[Event](16)
    (tmp_path / "dataset").mkdir()
    api = Api(events=_Events(receive), artifact_dir=tmp_path, dataset_dir=tmp_path / "dataset",
              compressed_dataset=True, host="127.0.0.1", port=0, server_factory=granian_server)
    with send, receive:
        async with anyio.create_task_group() as tg:
            await tg.start(api.run)
            yield api, send
            tg.cancel_scope.cancel()


async def start_run(aiperf: Run, kube: FakeKube) -> str:
    """A direct-mode run `demo` and its running controller pod; the pod's name."""
    result = await aiperf("kube", "profile", *BENCH, "--name", "demo", "--total-workers", "2", "--detach",
                          "--kubeconfig", kube.kubeconfig_path, "-n", NS)
    assert result.code == 0, result.err
    pod = "aiperf-demo-controller-0-0-abcde"
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": "aiperf-demo", "jobset.sigs.k8s.io/replicatedjob-name": "controller"}},
        "spec": {"containers": [{"name": "control-plane", "image": "x"},
                                {"name": "api", "image": "x", "ports": [{"containerPort": 9090}]}]}})
    kube.run_pod(NS, pod)
    return pod


class Lines:
    """Printed lines, with a wait for one that contains a text."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._added = anyio.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._added.set()
        self._added = anyio.Event()

    async def wait_for(self, text: str) -> None:
        with anyio.fail_after(10):
            while not any(text in line for line in self.lines):
                await self._added.wait()


async def test_attach_streams_the_api_progress_through_the_pod_proxy(aiperf: Run, kube: FakeKube,
                                                                     tmp_path: Path) -> None:
    pod = await start_run(aiperf, kube)
    lines = Lines()
    async with api_service(tmp_path) as (service, events):
        kube.register_proxy(NS, pod, 9090, forward_to(service.url), container="api")
        async with await connect(kube.kubeconfig_path, None) as client:
            codes: list[int] = []

            async def run() -> None:
                run = await resolve(client, NS, Selector("demo"))
                codes.append(await run.attach(LineRenderer("demo", emit=lines), 0.05))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await lines.wait_for("run demo: unknown")
                await events.send(SystemStateChanged(state=SystemState.PROFILING))
                await lines.wait_for("run demo: profiling")
                await events.send(Progress(phase=Phase.PROFILING, completed=40, errors=1, expected=80))
                await lines.wait_for("profiling 40/80 requests, 1 errors")
                await events.send(Progress(phase=Phase.PROFILING, completed=80, errors=1, expected=80))
                await lines.wait_for("profiling 80/80 requests")
                await events.send(SystemStateChanged(state=SystemState.DONE))
    assert codes == [0]
    assert [line.split("] ", 1)[1] for line in lines.lines] == [
        "run demo: unknown", "run demo: profiling", "run demo: profiling, profiling 40/80 requests, 1 errors",
        "run demo: profiling, profiling 80/80 requests, 1 errors", "run demo: done, profiling 80/80 requests, 1 errors",
        "run demo done; `aiperf kube results demo --from-pods -n bench` downloads it"]
    (upgrade,) = (r for r in kube.requests if r.path.endswith("/proxy/ws/progress"))
    assert upgrade.path == f"/api/v1/namespaces/{NS}/pods/{pod}:9090/proxy/ws/progress"


async def test_attach_polls_when_the_upgrade_is_refused_and_reports_a_failure(aiperf: Run, kube: FakeKube) -> None:
    pod = await start_run(aiperf, kube)
    snapshots = iter([{"state": "profiling", "progress": {"profiling": {"completed": 5, "errors": 0,
                                                                        "expected": 80}}},
                      {"state": "failed", "reason": "worker pod lost"}])

    async def old_api(request: web.Request, path: str) -> web.StreamResponse:
        """An api container without the WebSocket route."""
        if path == "/api/progress":
            return web.json_response(next(snapshots))
        return web.json_response({"detail": "not found"}, status=404)

    kube.register_proxy(NS, pod, 9090, old_api)
    result = await aiperf("kube", "attach", "demo", "--interval", "0.05", "--kubeconfig", kube.kubeconfig_path,
                          "-n", NS)
    assert result.code == 1
    assert result.err == "error: run demo failed: worker pod lost\n"
    assert [line.split("] ", 1)[1] for line in result.out.splitlines()] == [
        "WebSocket refused (404); polling /api/progress every 0.05s",
        "run demo: profiling, profiling 5/80 requests, 0 errors", "run demo: failed"]


async def test_attach_to_a_finished_or_missing_run(aiperf: Run, kube: FakeKube) -> None:
    await start_run(aiperf, kube)
    kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", {"conditions": [{"type": "Completed", "status": "True"}]})
    done = await aiperf("kube", "attach", "demo", "--kubeconfig", kube.kubeconfig_path, "-n", NS)
    assert done.code == 0 and done.out.split("] ", 1)[1] == "run demo Completed\n"
    assert [r for r in kube.requests if "/proxy/" in r.path] == []
    missing = await aiperf("kube", "attach", "nope", "--kubeconfig", kube.kubeconfig_path, "-n", NS)
    assert (missing.code, missing.err) == (2, "error: no run nope in namespace bench; `aiperf kube list -n bench` "
                                              "shows the runs\n")


async def test_attach_without_rights_on_pods_proxy_is_one_line(aiperf: Run, tmp_path: Path) -> None:
    async with FakeKube(namespaces=[NS], rbac=True) as kube:
        kube.create({"apiVersion": JS_API, "kind": "JobSet", "metadata": {
            "name": "aiperf-demo", "namespace": NS, "labels": {"app.kubernetes.io/name": "aiperf"}},
            "spec": {"replicatedJobs": []}})
        pod = "aiperf-demo-controller-0-0-abcde"
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
            "jobset.sigs.k8s.io/jobset-name": "aiperf-demo", "jobset.sigs.k8s.io/replicatedjob-name": "controller"}},
            "spec": {"containers": [{"name": "api", "image": "x", "ports": [{"containerPort": 9090}]}]}})
        kube.run_pod(NS, pod)
        kube.register_proxy(NS, pod, 9090, forward_to("http://127.0.0.1:9"))  # never reached
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": "viewer", "namespace": NS}, "rules": [
                         {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                         {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get"]},
                         {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs"], "verbs": ["get"]}]})
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": "viewer", "namespace": NS},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "viewer"},
                     "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": NS}]})
        config = kube.write_kubeconfig(tmp_path / "viewer", token=kube.token_for(NS, "viewer"))
        result = await aiperf("kube", "attach", "demo", "--kubeconfig", str(config), "-n", NS)
    assert (result.code, result.err) == (2, f"error: not allowed to reach pod {pod} through the API server (403): "
                                            "you need get on pods/proxy in the run's namespace\n")
