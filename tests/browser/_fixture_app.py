"""A stand-in results server for the dashboard's history mode: the documented JSON routes over
a results tree ``<base>/<ns>/<name>/<epoch>/<files>``, plus a controllable live job whose
progress WebSocket drops after one snapshot (to exercise the polling fallback).

Routes: ``GET /api/v1/results``, ``GET /api/v1/results/{ns}/{name}/runs`` (newest first),
``GET /api/v1/results/{ns}/{name}/runs/{epoch}``, ``GET .../runs/{epoch}/{file}``,
``GET /fixture/status/{ns}/{name}``, ``WS /fixture/ws/{ns}/{name}``, ``GET /fixture/counts`` (how
often the last two were used); the dashboard at ``/``. Run it: ``python _fixture_app.py BASE PORT``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litestar import Litestar, WebSocket, get, websocket
from litestar.exceptions import NotFoundException
from litestar.response import File

from aiperf.dashboard import DataSource, dashboard_routes

DATA = Path(__file__).parent / "data"
HISTORY = ("bench", "llama")
"""The job with two finished runs (data/run1, data/run2)."""
LIVE = ("bench", "live")
"""The job whose progress socket drops after one snapshot."""
EPOCHS = (1796149296, 1796149400)


@dataclass
class LiveStatus:
    """What the live job reports: the socket's one snapshot and the status route's answer."""

    ws_snapshot: dict[str, Any] = field(default_factory=lambda: {
        "phase": "Running", "progress": {"profiling": {"completed": 3, "expected": 10, "errors": 0,
                                                       "elapsed_s": 1.0}}})
    status: dict[str, Any] = field(default_factory=lambda: {
        "phase": "Completed", "progress": {"profiling": {"completed": 10, "expected": 10, "errors": 1,
                                                         "elapsed_s": 4.0}}})
    status_reads: int = 0
    ws_opened: int = 0


def make_results_tree(base: Path) -> dict[int, Path]:
    """Copy the two fixture runs into ``base/bench/llama/<epoch>/`` and give the live job one
    run without files; returns the history runs' directories by epoch."""
    dirs = {}
    for epoch, src in zip(EPOCHS, ("run1", "run2"), strict=True):
        d = base.joinpath(*HISTORY, str(epoch))
        shutil.copytree(DATA / src, d)
        dirs[epoch] = d
    base.joinpath(*LIVE, "1796149500").mkdir(parents=True)
    return dirs


def _run_item(d: Path) -> dict[str, Any]:
    summary = d / "profile_export_aiperf.json"
    completed = json.loads(summary.read_text())["end_time"] if summary.exists() else None
    return {"epoch": int(d.name), "phase": "Completed" if completed else "Running", "completedAt": completed,
            "files": [{"name": f.name, "size": f.stat().st_size} for f in sorted(d.iterdir())]}


def fixture_app(base: Path, live: LiveStatus) -> Litestar:
    """The app over the tree made by `make_results_tree`."""

    def job_dir(ns: str, name: str) -> Path:
        d = base / ns / name
        if ns.startswith(".") or name.startswith(".") or not d.is_dir():
            raise NotFoundException(detail=f"no job {ns}/{name}")
        return d

    def runs_of(ns: str, name: str) -> list[dict[str, Any]]:
        return [_run_item(d) for d in sorted(job_dir(ns, name).iterdir(), reverse=True)]

    @get("/api/v1/results", sync_to_thread=False)
    def jobs() -> dict[str, Any]:
        items = []
        for ns in sorted(base.iterdir()):
            for job in sorted(ns.iterdir()):
                runs = runs_of(ns.name, job.name)
                items.append({"namespace": ns.name, "name": job.name, "runs": len(runs),
                              "latestEpoch": runs[0]["epoch"], "phase": runs[0]["phase"]})
        return {"items": items}

    @get("/api/v1/results/{ns:str}/{name:str}/runs", sync_to_thread=False)
    def runs(ns: str, name: str) -> dict[str, Any]:
        return {"items": runs_of(ns, name)}

    @get("/api/v1/results/{ns:str}/{name:str}/runs/{epoch:int}", sync_to_thread=False)
    def run(ns: str, name: str, epoch: int) -> dict[str, Any]:
        d = job_dir(ns, name) / str(epoch)
        if not d.is_dir():
            raise NotFoundException(detail=f"no run {epoch}")
        return _run_item(d)

    @get("/api/v1/results/{ns:str}/{name:str}/runs/{epoch:int}/{file:str}", sync_to_thread=False)
    def run_file(ns: str, name: str, epoch: int, file: str) -> File:
        path = job_dir(ns, name) / str(epoch) / file
        if "/" in file or file.startswith(".") or not path.is_file():
            raise NotFoundException(detail=f"no file {file}")
        return File(path=path, filename=file)

    @get("/fixture/status/{ns:str}/{name:str}", sync_to_thread=False)
    def status(ns: str, name: str) -> dict[str, Any]:
        live.status_reads += 1
        return live.status

    @get("/fixture/counts", sync_to_thread=False)
    def counts() -> dict[str, int]:
        return {"statusReads": live.status_reads, "wsOpened": live.ws_opened}

    @websocket("/fixture/ws/{ns:str}/{name:str}")
    async def progress(socket: WebSocket[Any, Any, Any], ns: str, name: str) -> None:
        live.ws_opened += 1
        await socket.accept()
        await socket.send_json(live.ws_snapshot)
        await socket.close(code=1001, reason="fixture: the socket drops")

    source = DataSource(status_url="/fixture/status/{ns}/{name}", progress_ws_url="/fixture/ws/{ns}/{name}",
                        poll_interval_s=0.3, title="AIPerf results (fixture)")
    return Litestar(route_handlers=[jobs, runs, run, run_file, status, counts, progress,
                                    *dashboard_routes(source=source, path="/")],
                    logging_config=None, openapi_config=None)




def main(argv: list[str]) -> None:
    """Serve `fixture_app` over the tree at ``argv[0]`` on 127.0.0.1:``argv[1]`` until killed."""
    from aiperf.api.server import granian_server

    server = granian_server(fixture_app(Path(argv[0]), LiveStatus()), "127.0.0.1", int(argv[1]))
    asyncio.run(server.serve())


if __name__ == "__main__":
    main(sys.argv[1:])
