"""`fake_kube_proxy.forward_to`: pods/proxy relays HTTP and WebSocket upgrades to a real server
on 127.0.0.1, only while the pod runs and only for callers RBAC allows, as the API server's
upgrade-aware proxy does. Driven by aiohttp with kubernetes_asyncio's session and credentials."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.config import new_client_from_config

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_proxy import forward_to

pytestmark = pytest.mark.anyio

NS = "bench"


async def _echo(request: web.Request) -> web.WebSocketResponse:
    socket = web.WebSocketResponse()
    await socket.prepare(request)
    await socket.send_str(f"hello {request.query.get('who', '?')}")
    async for message in socket:
        if message.data == "bye":
            await socket.close(code=4000, message=b"asked to")
            break
        await socket.send_str(f"echo {message.data}")
    return socket


async def _status(request: web.Request) -> web.Response:
    return web.json_response({"path": request.path, "method": request.method, "body": await request.text()},
                             status=201 if request.method == "POST" else 200, headers={"X-Pod": "yes"})


@pytest.fixture
async def upstream() -> AsyncIterator[str]:
    """A real server: `/ws` echoes over a WebSocket, anything else answers JSON."""
    app = web.Application()
    app.router.add_get("/ws", _echo)
    app.router.add_route("*", "/{tail:.*}", _status)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}"
    await runner.cleanup()


async def _pod(kube: FakeKube, api: ApiClient) -> str:
    await CoreV1Api(api).create_namespaced_pod(NS, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "api", "image": "img:1", "ports": [{"containerPort": 9090}]}]}})
    kube.run_pod(NS, "p")
    return f"{kube.url}/api/v1/namespaces/{NS}/pods/p:9090/proxy"


async def _auth(api: ApiClient) -> dict[str, str]:
    headers: dict[str, str] = {}
    await api.update_params_for_auth(headers, [], ["BearerToken"])
    return headers


async def test_http_and_websockets_reach_the_server_while_the_pod_runs(kube: FakeKube, api: ApiClient,
                                                                       upstream: str) -> None:
    base = await _pod(kube, api)
    kube.register_proxy(NS, "p", 9090, forward_to(upstream))
    session: aiohttp.ClientSession = api.rest_client.pool_manager
    async with session.post(f"{base}/api/x?y=1", data=b"payload") as response:
        assert (response.status, response.headers["X-Pod"]) == (201, "yes")
        assert await response.json() == {"path": "/api/x", "method": "POST", "body": "payload"}

    async with session.ws_connect(f"{base}/ws?who=proxy", headers=await _auth(api)) as socket:
        assert (await socket.receive_str()) == "hello proxy"
        await socket.send_str("ping")
        assert (await socket.receive_str()) == "echo ping"
        await socket.send_str("bye")
        closed = await socket.receive()
        assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 4000  # the pod's close code

    kube.terminate_pod(NS, "p")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await session.ws_connect(f"{base}/ws")
    assert refused.value.status == 503  # nothing listens in a finished pod


async def test_an_upgrade_the_server_refuses_comes_back_with_its_status(kube: FakeKube, api: ApiClient,
                                                                       upstream: str) -> None:
    base = await _pod(kube, api)
    kube.register_proxy(NS, "p", 9090, forward_to(upstream))
    session: aiohttp.ClientSession = api.rest_client.pool_manager
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await session.ws_connect(f"{base}/not-a-socket")
    assert refused.value.status == 200  # a plain answer is not a 101: the upgrade failed


async def test_rbac_applies_to_websocket_upgrades(upstream: str) -> None:
    async with FakeKube(namespaces=[NS], rbac=True) as kube:
        async with await new_client_from_config(kube.kubeconfig_path, persist_config=False) as admin:
            base = await _pod(kube, admin)
        kube.register_proxy(NS, "p", 9090, forward_to(upstream))
        token = kube.token_for(NS, "reader")
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": "pods", "namespace": NS},
                     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
        kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": "reader", "namespace": NS},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
                     "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NS}]})
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(f"{base}/ws")
            assert refused.value.status == 403  # pods, not pods/proxy
            kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                         "metadata": {"name": "proxy", "namespace": NS},
                         "rules": [{"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}]})
            kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "proxy", "namespace": NS},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "proxy"},
                         "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NS}]})
            async with session.ws_connect(f"{base}/ws?who=reader") as socket:
                assert (await socket.receive_str()) == "hello reader"


async def test_a_server_not_listening_yet_is_a_503_with_the_dial_error(kube: FakeKube, api: ApiClient) -> None:
    """The container runs but its server does not accept yet (it is still starting): the API
    server's 503, never a 500 from the proxy itself."""
    base = await _pod(kube, api)
    kube.register_proxy(NS, "p", 9090, forward_to("http://127.0.0.1:9"))  # discard port: refused
    session: aiohttp.ClientSession = api.rest_client.pool_manager
    async with session.get(f"{base}/api/status", headers=await _auth(api)) as response:
        assert response.status == 503
        assert "connection refused" in (await response.json())["message"]


async def test_services_proxy_reaches_a_ready_pod_the_selector_picks(kube: FakeKube, api: ApiClient,
                                                                     upstream: str) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_service(NS, {"metadata": {"name": "svc"}, "spec": {
        "selector": {"app": "x"}, "ports": [{"name": "http", "port": 80, "targetPort": "web"},
                                            {"name": "raw", "port": 81, "targetPort": 9091}]}})
    session: aiohttp.ClientSession = api.rest_client.pool_manager
    base = f"{kube.url}/api/v1/namespaces/{NS}/services"
    async with session.get(f"{base}/svc:http/proxy/a") as response:
        assert response.status == 503 and (await response.json())["message"] == 'no endpoints available for service "svc"'
    await core.create_namespaced_pod(NS, {"metadata": {"name": "other", "labels": {"app": "y"}}, "spec": {
        "containers": [{"name": "c", "image": "img:1", "ports": [{"name": "web", "containerPort": 8080}]}]}})
    kube.run_pod(NS, "other")  # not selected
    await core.create_namespaced_pod(NS, {"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {
        "containers": [{"name": "c", "image": "img:1", "ports": [{"name": "web", "containerPort": 8080}]}]}})
    kube.register_proxy(NS, "p", 8080, forward_to(upstream))
    async with session.get(f"{base}/svc:http/proxy/a") as response:
        assert response.status == 503  # selected but not running yet
    kube.run_pod(NS, "p")
    for target in ("svc:http", "svc:80", "svc", "http:svc:http"):
        async with session.get(f"{base}/{target}/proxy/api/y") as response:
            assert response.status == 200, target
            assert (await response.json())["path"] == "/api/y"
    async with session.get(f"{base}/svc:raw/proxy/a") as response:
        assert response.status == 503  # nothing listens on 9091 in the pod
    async with session.get(f"{base}/svc:nope/proxy/a") as response:
        assert response.status == 503 and "no service port" in (await response.json())["message"]
    async with session.get(f"{base}/missing:http/proxy/a") as response:
        assert response.status == 404
