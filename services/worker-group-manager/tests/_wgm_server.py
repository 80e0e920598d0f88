"""A real aiohttp server standing in for the api's dataset endpoint (Kubernetes flavour)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from aiperf.dataset import ZST_SUFFIX


@dataclass(kw_only=True)
class DatasetServer:
    """Serves `<folder>/<name>.zst` at `/api/dataset/<name>` as-is with `Content-Encoding: zstd`,
    in pieces of `piece` bytes. The first `busy` requests per file answer 503 (dataset not
    configured yet); `status` overrides every answer; `truncate` cuts each file short."""

    folder: Path
    busy: int = 0
    status: int | None = None
    truncate: int = 0
    piece: int = 4096
    hits: Counter[str] = field(default_factory=Counter)
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] += 1
        if self.status is not None:
            return web.Response(status=self.status, text="nope")
        if self.hits[name] <= self.busy:
            return web.json_response({"status_code": 503, "detail": "dataset not configured yet"},
                                     status=503, headers={"Retry-After": "1"})
        body = (self.folder / (name + ZST_SUFFIX)).read_bytes()
        if self.truncate:
            body = body[:-self.truncate]
        response = web.StreamResponse(headers={"Content-Encoding": "zstd",
                                               "Content-Type": "application/octet-stream"})
        response.content_length = len(body)
        await response.prepare(request)
        for start in range(0, len(body), self.piece):
            await response.write(body[start:start + self.piece])
        await response.write_eof()
        return response


@asynccontextmanager
async def serving(server: DatasetServer) -> AsyncIterator[DatasetServer]:
    """Run `server` on 127.0.0.1 (free port); `server.url` is its dataset base URL."""
    app = web.Application()
    app.router.add_get("/api/dataset/{name}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}/api/dataset"
    try:
        yield server
    finally:
        await runner.cleanup()


@dataclass(kw_only=True)
class UploadServer:
    """Stands in for the api's raw-part upload route `PUT /api/raw/<name>`: keeps each body in
    `received` and answers 201 ``{"size": n}``. The first `busy` requests answer 503; `status`
    overrides every answer; `ack_delta` is added to the acknowledged size (a lying or broken
    receiver); a request without ``Bearer <token>`` gets 401."""

    token: str
    busy: int = 0
    status: int | None = None
    ack_delta: int = 0
    received: dict[str, bytes] = field(default_factory=dict)
    hits: int = 0
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        body = await request.read()
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"detail": "wrong token"}, status=401)
        if self.status is not None:
            return web.Response(status=self.status, text="nope")
        if self.hits <= self.busy:
            return web.json_response({"detail": "busy"}, status=503)
        self.received[request.match_info["name"]] = body
        return web.json_response({"name": request.match_info["name"], "size": len(body) + self.ack_delta},
                                 status=201)


@asynccontextmanager
async def serving_uploads(server: UploadServer) -> AsyncIterator[UploadServer]:
    """Run `server` on 127.0.0.1 (free port); `server.url` is the api's base URL."""
    app = web.Application()
    app.router.add_put("/api/raw/{name}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()
