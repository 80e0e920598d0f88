"""The real results server (`aiperf.results_server`) over a results volume with two finished runs,
plus a controllable live job whose progress WebSocket drops after one snapshot (to exercise the
dashboard's polling fallback).

Besides the results server's own routes: ``GET /fixture/status/{ns}/{name}``,
``WS /fixture/ws/{ns}/{name}``, ``GET /fixture/counts`` (how often the last two were used); the
dashboard at ``/``. Run it: ``python _fixture_app.py BASE PORT``.
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

from aiperf.dashboard import DataSource, dashboard_routes
from aiperf.results import disk
from aiperf.results.app import create_app
from aiperf.results.model import RunRecord
from aiperf.results_server.main import open_source

DATA = Path(__file__).parent / "data"
HISTORY = ("bench", "llama")
"""The job with two finished runs (data/run1, data/run2)."""
LIVE = ("bench", "live")
"""The job whose progress socket drops after one snapshot."""
EPOCHS = (1796149296, 1796149400)
LIVE_EPOCH = "1796149500"
SWEEP = ("bench", "sw")
"""The AIPerfSweep with one stored aggregate (kept as job `sweeps/sw`, as the operator's harvest)."""
SWEEP_EPOCH = "1796149600"
SWEEP_THROUGHPUT = {"concurrency_2": 19.5, "concurrency_4": 37.25}
"""Mean request throughput per combination in the stored sweep aggregate."""


def sweep_aggregate() -> dict[str, Any]:
    """The sweep's `profile_export_aiperf_sweep.json`: two combinations, the faster one also the
    one with the lower p99 latency (so it alone is Pareto-optimal)."""
    from aiperf.metrics.multirun import sweep_document

    def aggregate(throughput: float, p99: float) -> dict[str, Any]:
        return {"num_successful_runs": 1, "metrics": {
            "request_throughput": {"avg": {"mean": throughput}}, "request_latency": {"p99": {"mean": p99},
                                                                                     "avg": {"mean": p99 / 2}},
            "time_to_first_token": {"avg": {"mean": 20.0}}}}

    return sweep_document([(label, {"concurrency": int(label.rsplit("_", 1)[1])}, aggregate(thr, 400.0 - thr))
                           for label, thr in SWEEP_THROUGHPUT.items()], sweep_type="grid")


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
    """Store the two fixture runs as completed runs of ``bench/llama`` (the layout the operator
    writes: ``<epoch>/`` with its run marker, ``latest.txt``) and give the live job one run that
    is still going; returns the history runs' directories by epoch."""
    dirs = {}
    for epoch, src in zip(EPOCHS, ("run1", "run2"), strict=True):
        d = base.joinpath(*HISTORY, str(epoch))
        shutil.copytree(DATA / src, d)
        record = RunRecord(namespace=HISTORY[0], name=HISTORY[1], epoch=str(epoch), uid=f"uid-{epoch}",
                           phase="Completed", completed_at="2026-12-01T00:00:00Z")
        (d / disk.RUN_MARKER).write_text(disk.marker_json(record))
        dirs[epoch] = d
    disk.write_latest(base.joinpath(*HISTORY), str(EPOCHS[1]))
    live = base.joinpath(*LIVE)
    live.mkdir(parents=True)
    pending = RunRecord(namespace=LIVE[0], name=LIVE[1], epoch=LIVE_EPOCH, uid="uid-live", phase="Running")
    disk.pending_file(live, LIVE_EPOCH).write_text(disk.marker_json(pending))
    sweep = base / SWEEP[0] / "sweeps" / SWEEP[1] / SWEEP_EPOCH
    sweep.mkdir(parents=True)
    (sweep / "profile_export_aiperf_sweep.json").write_text(json.dumps(sweep_aggregate()))
    (sweep / "aggregate.json").write_text(json.dumps({"sweep_aggregate": sweep_aggregate()}))
    record = RunRecord(namespace=SWEEP[0], name=f"sweeps/{SWEEP[1]}", epoch=SWEEP_EPOCH, uid="uid-sweep",
                       phase="Completed", completed_at="2026-12-01T00:00:00Z")
    (sweep / disk.RUN_MARKER).write_text(disk.marker_json(record))
    disk.write_latest(sweep.parent, SWEEP_EPOCH)
    return dirs


def fixture_app(base: Path, live: LiveStatus) -> Litestar:
    """The results server over the tree made by `make_results_tree`, with the fixture's live
    routes and the dashboard (at ``/``) reading them."""

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
    return create_app(open_source(base, "volume"), extra_route_handlers=[
        status, counts, progress, *dashboard_routes(source=source, path="/")])


def main(argv: list[str]) -> None:
    """Serve `fixture_app` over the tree at ``argv[0]`` on 127.0.0.1:``argv[1]`` until killed."""
    from aiperf.runtime.http import granian_server

    server = granian_server(fixture_app(Path(argv[0]), LiveStatus()), "127.0.0.1", int(argv[1]))
    asyncio.run(server.serve())


if __name__ == "__main__":
    main(sys.argv[1:])
