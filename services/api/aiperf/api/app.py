"""The Litestar app of the api service: health, progress (HTTP and WebSocket), results, dataset.

Handlers only read a `RunView` and files under the run's directories; they never block the loop
(files are streamed by Litestar in chunks).
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog
from litestar import Litestar, Request, Response, WebSocket, get, put, websocket
from litestar.exceptions import (
    NotFoundException,
    ServiceUnavailableException,
    WebSocketDisconnect,
)
from litestar.params import FromPath
from litestar.response import File

from aiperf.api.app_config import AppConfig
from aiperf.api.live import LiveJob, live_routes, live_source
from aiperf.api.prom import RECORDS_JSONL, RunMetrics, metrics_route
from aiperf.api.raw_upload import RAW_PARTS_DIR, RAW_UPLOAD_PATH, RawUploads
from aiperf.api.view import RunView
from aiperf.dashboard import dashboard_routes
from aiperf.results.files import (
    EXPORT_FILES,
    MEDIA_TYPES,
    SUMMARY_JSON,
    check_name,
    existing_file,
    unexpected_logger,
)

log = structlog.get_logger("aiperf.api")

DATASET_FILES = frozenset({"dataset.dat", "index.dat"})
"""The dataset files `/api/dataset/{name}` serves."""

ZST_SUFFIX = ".zst"
DASHBOARD_PATH = "/dashboard"


def create_app(*, view: RunView, config: AppConfig) -> Litestar:
    """Build the app over `view` and the files named by `config`.

    Endpoints: ``GET /health``, ``GET /api/progress``, ``WS /ws/progress``, ``GET /api/results``,
    ``GET /api/results/files/{name}``, ``GET /api/dataset/{name}``, ``PUT /api/raw/{name}``
    (`aiperf.api.raw_upload`: a worker pod's raw part, bearer token required), ``GET /metrics`` (Prometheus,
    `aiperf.api.prom`), the web dashboard at ``/dashboard/`` with its JSON adapter
    ``/api/dashboard/...`` (`aiperf.api.live`). Progress snapshots carry ``jobPhase``
    (`LiveJob.phase`). Errors are JSON (``{"status_code": n, "detail": "..."}``).
    """
    live = LiveJob(view=view, artifact_dir=config.artifact_dir, files=EXPORT_FILES)
    metrics = RunMetrics(view=view, records_path=config.artifact_dir / RECORDS_JSONL)

    @get("/health", sync_to_thread=False)
    def health() -> dict[str, str]:
        return {"status": "ok", "state": view.state_name}

    @get("/api/progress")
    async def progress() -> dict[str, Any]:
        return await live.snapshot()

    @websocket("/ws/progress")
    async def progress_ws(socket: WebSocket[Any, Any, Any]) -> None:
        await _stream_progress(socket, view, live)

    @get("/api/results")
    async def results() -> Response[bytes]:
        path = config.artifact_dir / SUMMARY_JSON
        try:
            body = await anyio.Path(path).read_bytes()
        except FileNotFoundError:
            raise NotFoundException(detail=f"{SUMMARY_JSON} not written yet") from None
        return Response(content=body, media_type="application/json")

    @get("/api/results/files/{name:str}")
    async def result_file(name: FromPath[str]) -> File:
        path = await existing_file(config.artifact_dir, name, EXPORT_FILES)
        return File(path=path, filename=name, media_type=MEDIA_TYPES.get(path.suffix))

    @get("/api/dataset/{name:str}")
    async def dataset_file(name: FromPath[str]) -> File:
        if view.dataset is None:
            raise ServiceUnavailableException(detail="dataset not configured yet",
                                              headers={"Retry-After": "1"})
        if not config.compressed_dataset:
            path = await existing_file(config.dataset_dir, name, DATASET_FILES)
            return File(path=path, filename=name, media_type="application/octet-stream")
        check_name(name, DATASET_FILES)
        path = await existing_file(config.dataset_dir, name + ZST_SUFFIX,
                                    frozenset(n + ZST_SUFFIX for n in DATASET_FILES))
        # The stored zstd copy goes out byte for byte; the client decodes it.
        return File(path=path, filename=name, media_type="application/octet-stream",
                    headers={"Content-Encoding": "zstd"})

    uploads = RawUploads(directory=config.artifact_dir / RAW_PARTS_DIR, token=config.upload_token)

    @put(RAW_UPLOAD_PATH + "/{name:str}", status_code=201, request_max_body_size=None)
    async def upload_raw(name: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        uploads.authorize(request.headers.get("authorization"))
        size = await uploads.store(name, request.stream(), declared=request.content_length)
        return {"name": name, "size": size}

    return Litestar(route_handlers=[health, progress, progress_ws, results, result_file, dataset_file,
                                    upload_raw, metrics_route(metrics), *live_routes(live),
                                    *dashboard_routes(source=live_source(), path=DASHBOARD_PATH)],
                    logging_config=None, after_exception=[unexpected_logger("api.request_failed")], openapi_config=None)


async def _stream_progress(socket: WebSocket[Any, Any, Any], view: RunView, live: LiveJob) -> None:
    """Send a snapshot now, after every change, and once more when the view closes (the api is
    stopping), until the client leaves."""
    await socket.accept()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_until_disconnect, socket, tg.cancel_scope)
            seen = -1
            while (version := await view.next_change(seen)) is not None:
                seen = version
                await socket.send_json(await live.snapshot())
            # The view closes when the api stops, after the exports: the client gets that last
            # state (`LiveJob.phase` reads done once the summary is written).
            await socket.send_json(await live.snapshot())
            tg.cancel_scope.cancel()
    except* WebSocketDisconnect:
        pass
    if socket.connection_state != "disconnect":
        await socket.close(reason="server stopping")


async def _until_disconnect(socket: WebSocket[Any, Any, Any], scope: anyio.CancelScope) -> None:
    """Drain client messages (ignored); cancel `scope` when the client disconnects."""
    while (await socket.receive())["type"] != "websocket.disconnect":
        pass
    scope.cancel()


__all__ = ["DASHBOARD_PATH", "DATASET_FILES", "AppConfig", "create_app"]
