"""`kube dashboard`: the local forwarder against a real HTTP upstream (path, query, credentials,
streaming, refusals), and the command against the fake API server, which has no results server."""

from __future__ import annotations

import socket
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from aiperf.cli.kube_dashboard import ServiceForwarder
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_app(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_forwarder_relays_gets_with_credentials() -> None:
    seen: list[tuple[str, str, str | None]] = []

    async def upstream(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, request.rel_url.raw_path_qs, request.headers.get("Authorization")))
        return web.Response(body=b"x" * 200_000, content_type="application/x-ndjson",
                            headers={"Cache-Control": "no-cache", "Set-Cookie": "a=b"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", upstream)

    async def auth() -> dict[str, str]:
        return {"Authorization": "Bearer t0k"}

    async with http_app(app) as up, aiohttp.ClientSession() as session:
        forwarder = ServiceForwarder(session=session, upstream=up + "/api/v1/namespaces/ops/services/s:8081/proxy/",
                                     auth=auth)
        async with http_app(forwarder.app()) as local:
            async with session.get(local + "/api/v1/results/bench/a%2Fb/runs?x=1&y=%20") as response:
                body = await response.read()
                assert response.status == 200 and len(body) == 200_000
                assert response.headers["Content-Type"] == "application/x-ndjson"
                assert response.headers["Cache-Control"] == "no-cache" and "Set-Cookie" not in response.headers
            async with session.post(local + "/api/v1/results", data=b"{}") as refused:
                assert refused.status == 405
    assert seen == [("GET", "/api/v1/namespaces/ops/services/s:8081/proxy/api/v1/results/bench/a%2Fb/runs?x=1&y=%20",
                     "Bearer t0k")]


async def test_forwarder_answers_502_when_the_upstream_is_gone() -> None:
    async def auth() -> dict[str, str]:
        return {}

    async with aiohttp.ClientSession() as session:
        forwarder = ServiceForwarder(session=session, upstream=f"http://127.0.0.1:{free_port()}", auth=auth)
        async with http_app(forwarder.app()) as local, session.get(local + "/dashboard/") as response:
            assert response.status == 502
            assert "cannot reach the results server" in (await response.json())["detail"]


async def test_command_names_the_missing_results_server(aiperf: Callable[..., Awaitable[Any]], kube: FakeKube,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", opened.append)
    result = await aiperf("kube", "dashboard", "--kubeconfig", kube.kubeconfig_path, "--operator-namespace", "bench")
    assert result.code == 2, result.err
    assert "no results server at Service aiperf-operator:8081 in namespace bench" in result.err
    assert "Traceback" not in result.err and opened == []


async def test_command_refuses_a_bad_port(aiperf: Callable[..., Awaitable[Any]]) -> None:
    result = await aiperf("kube", "dashboard", "--port", "70000", "--no-open")
    assert result.code == 2 and "--port 70000 is not a TCP port" in result.err
