"""Issue 9, testing points 6 and 10 (pod logs): pods/proxy reaches only a listening port of a
running container in an unfinished pod with an IP, and pods/log answers as the kubelet does
for waiting containers and streams with `follow`. Driven by kubernetes_asyncio over real HTTP."""

from __future__ import annotations

import anyio
import pytest
from _widgets import status_of
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


async def answer(request: web.Request, path: str) -> web.Response:
    return web.Response(text=f"results at {path}")


async def test_proxy_needs_the_registered_port_and_an_unfinished_pod(kube: FakeKube, api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "api", "image": "img:1", "ports": [{"containerPort": 9090}]}]}})
    kube.run_pod("bench", "p")
    kube.register_proxy("bench", "p", 9090, answer)
    assert await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "r") == "results at /r"
    assert await core.connect_get_namespaced_pod_proxy_with_path("p", "bench", "r") == "results at /r"  # 1st port
    with pytest.raises(ApiException) as exc:  # another port: nothing listens there
        await core.connect_get_namespaced_pod_proxy_with_path("p:8080", "bench", "r")
    assert exc.value.status == 503
    kube.terminate_pod("bench", "p")  # a finished pod keeps its IP, but its processes are gone
    with pytest.raises(ApiException) as exc:
        await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "r")
    assert exc.value.status == 503
    assert status_of(exc)["message"].startswith("error trying to reach service: dial tcp ")


async def test_logs_of_waiting_containers_are_400_and_follow_streams_until_the_end(kube: FakeKube,
                                                                                   api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "img:1"}]}})
    assert await core.read_namespaced_pod_log("p", "bench") == ""  # not scheduled: an empty log
    bound = await core.create_namespaced_pod_binding(  # as the scheduler does; the answer is a Status,
        "p", "bench", {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-1"}},
        _preload_content=False)  # which the generated client cannot read as a Binding (as for real)
    bound.release()
    kube.pods.set_container_state("bench", "p", "c", {"waiting": {"reason": "ImagePullBackOff"}})
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_pod_log("p", "bench")
    assert (exc.value.status, status_of(exc)["message"]) == (
        400, 'container "c" in pod "p" is waiting to start: trying and failing to pull image')

    kube.run_pod("bench", "p")
    kube.set_pod_log("bench", "p", "one\n")
    response = await core.read_namespaced_pod_log("p", "bench", follow=True, _preload_content=False)
    try:
        with anyio.fail_after(10):
            assert await response.content.readline() == b"one\n"
            kube.append_pod_log("bench", "p", "two\n")
            assert await response.content.readline() == b"two\n"
            kube.terminate_pod("bench", "p")
            assert await response.content.read() == b""  # the stream ends with the container
    finally:
        response.release()


async def test_proxy_to_a_container_that_exited_is_refused_while_its_pod_runs(kube: FakeKube,
                                                                              api: ApiClient) -> None:
    # The controller pod after a run: the api container has exited, the results sidecar serves on.
    core = CoreV1Api(api)
    await core.create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "api", "image": "img:1", "ports": [{"containerPort": 9090}]},
        {"name": "results-sidecar", "image": "img:1", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod("bench", "p")
    kube.register_proxy("bench", "p", 9090, answer)
    kube.register_proxy("bench", "p", 9091, answer)
    assert await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "r") == "results at /r"
    kube.end_container("bench", "p", "api")
    pod = await core.read_namespaced_pod("p", "bench")
    assert pod.status.phase == "Running"
    with pytest.raises(ApiException) as exc:
        await core.connect_get_namespaced_pod_proxy_with_path("p:9090", "bench", "r")
    assert exc.value.status == 503
    assert await core.connect_get_namespaced_pod_proxy_with_path("p:9091", "bench", "r") == "results at /r"
