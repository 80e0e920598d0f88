"""`aiperf.runtime.http.LazyApp`: built at the first request, lifespan answered without it,
served over a real granian server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import aiohttp
import anyio
import pytest

from aiperf.runtime.http import HttpServer, LazyApp

pytestmark = pytest.mark.anyio


class Factory:
    """Counts its calls; the first `failures` calls raise."""

    def __init__(self, failures: int = 0) -> None:
        self.calls, self._failures = 0, failures

    def __call__(self) -> Any:
        self.calls += 1
        if self.calls <= self._failures:
            raise RuntimeError("build failed")

        async def app(scope: Any, receive: Any, send: Any) -> None:
            assert scope["type"] == "http"
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": f"{scope['path']} {self.calls}".encode()})

        return app


async def test_built_once_at_the_first_request_not_at_start() -> None:
    factory = Factory()
    lazy = LazyApp(factory)
    server = HttpServer(lazy, host="127.0.0.1", port=0)
    async with anyio.create_task_group() as tg, aiohttp.ClientSession() as http:
        await tg.start(server.run)
        assert (factory.calls, lazy.built) == (0, False)
        for path in ("/a", "/b"):
            async with http.get(f"{server.url}{path}") as response:
                assert (response.status, await response.text()) == (200, f"{path} 1")
        assert (factory.calls, lazy.built) == (1, True)
        server.stop()
    assert factory.calls == 1


async def test_lifespan_is_answered_without_building() -> None:
    factory = Factory()
    lazy = LazyApp(factory)
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(5):
        await lazy({"type": "lifespan"}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert factory.calls == 0


async def test_a_failed_build_is_retried_by_the_next_request() -> None:
    factory = Factory(failures=1)
    lazy = LazyApp(factory)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/x"}
    with pytest.raises(RuntimeError, match="build failed"):
        await lazy(scope, receive, send)
    assert not lazy.built and not sent
    await lazy(scope, receive, send)
    assert lazy.built and sent[-1]["body"] == b"/x 2"
