"""The operator's HTTP endpoints: `GET /healthz` (liveness and readiness) and `GET /metrics`.

`/healthz` answers 200 `ok` once `ready()` is true and 503 before; `/metrics` answers the
Prometheus text of `Metrics.render()`. Both may share one port or use two.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from aiohttp import web

from aiperf.operator.metrics import CONTENT_TYPE, Metrics


def build_app(*, metrics: Metrics | None, ready: Callable[[], bool] | None) -> web.Application:
    """An aiohttp app serving `/healthz` when `ready` is given and `/metrics` when `metrics` is."""
    app = web.Application()
    if ready is not None:
        async def healthz(_: web.Request) -> web.Response:
            ok = ready()
            return web.Response(status=200 if ok else 503, text="ok\n" if ok else "starting\n")
        app.router.add_get("/healthz", healthz)
    if metrics is not None:
        async def render(_: web.Request) -> web.Response:
            return web.Response(body=metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})
        app.router.add_get("/metrics", render)
    return app


@asynccontextmanager
async def serving(app: web.Application, *, host: str, port: int) -> AsyncIterator[int]:
    """Serve `app` on `host:port` while entered (port 0: any free port); yields the bound port.
    Raises OSError when the port cannot be bound."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()
