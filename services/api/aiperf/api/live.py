"""The live run as a dashboard job: the JSON the dashboard pages read, in the results server's
shapes (``{"jobs": [...]}`` / ``{"runs": [...]}`` with camelCase keys, as `aiperf.results` answers), for the one run this api serves.

The run is job ``local/<artifact dir name>`` with one run whose epoch is the api's start time.
Its phase is the run's `SystemState` (see `LiveJob.phase`), except that once the run is ending
it reads ``done`` (or ``cancelled``) when the summary export is written, and ``failed`` as soon as
a service failed: the api itself stops before the controller's final state would reach it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import orjson
from litestar import get
from litestar.params import FromPath
from litestar.types import ControllerRouterHandler

from aiperf.api.view import RunView
from aiperf.dashboard import DataSource
from aiperf.messages import SystemState

LIVE_NAMESPACE = "local"
JOBS_PATH = "/api/dashboard/jobs"
RUNS_PATH = "/api/dashboard/jobs/{ns}/{name}/runs"
"""The runs route as a dashboard URL template (the route itself types its parameters)."""
SUMMARY_JSON = "profile_export_aiperf.json"

_ENDING = frozenset({SystemState.STOPPING, SystemState.DONE, SystemState.CANCELLED})


def live_source() -> DataSource:
    """The dashboard's data source on the api service: the adapter routes below, the export
    files of `/api/results/files/{name}`, progress from `/ws/progress`, polling `/api/progress`."""
    return DataSource(jobs_url=JOBS_PATH, runs_url=RUNS_PATH,
                      file_url="/api/results/files/{file}", status_url="/api/progress",
                      progress_ws_url="/ws/progress", sweeps_url=None, poll_interval_s=1.0,
                      title="AIPerf live run")


class LiveJob:
    """The dashboard's view of the run served by this api: job item, run item, phase.

    Reads `view` and the files of `artifact_dir`; file checks run in a worker thread, so no
    method blocks the loop. `files` names the export files a run item may list.
    """

    def __init__(self, *, view: RunView, artifact_dir: Path, files: frozenset[str],
                 epoch: int | None = None) -> None:
        self._view, self._dir, self._files = view, artifact_dir, files
        self.name = artifact_dir.name or "run"
        self.epoch = epoch if epoch is not None else int(time.time())
        self._summary: dict[str, Any] | None = None

    async def phase(self) -> str:
        """``failed`` once a service failed; ``done``/``cancelled`` once the run is ending (state
        stopping, or this api stopping: the view closed) with the summary written; else the
        state's name, or before the controller's first state broadcast arrived the latest
        benchmark phase started (``processing`` after the profiling phase completed), else
        ``starting``."""
        view = self._view
        snap = view.snapshot()
        if view.state is SystemState.FAILED or snap["failures"]:
            return str(SystemState.FAILED)
        if view.state in _ENDING or view.closed:
            summary = await self._read_summary()
            if summary is not None:
                return str(SystemState.CANCELLED if summary.get("was_cancelled") else SystemState.DONE)
        if view.state is not None:
            return view.state_name
        phases = snap["phases"]
        if phases.get("profiling", {}).get("complete"):
            return str(SystemState.PROCESSING)
        started = [(events["started"].get("started_at_ns", 0), phase) for phase, events in phases.items()
                   if "started" in events]
        return max(started)[1] if started else "starting"

    async def snapshot(self) -> dict[str, Any]:
        """The view's snapshot plus ``jobPhase`` (see `phase`)."""
        return {**self._view.snapshot(), "jobPhase": await self.phase()}

    async def job_item(self) -> dict[str, Any]:
        """One item of the jobs list, with the main phase's progress."""
        progress = self._view.snapshot()["progress"]
        main = next((progress[p] for p in ("profiling", "warmup", *progress) if p in progress), None)
        item: dict[str, Any] = {"namespace": LIVE_NAMESPACE, "name": self.name, "runCount": 1,
                                "latestEpoch": self.epoch, "phase": await self.phase()}
        if main is not None:
            item["progress"] = {k: main.get(k) for k in ("phase", "completed", "expected", "errors")}
        return item

    async def run_item(self) -> dict[str, Any]:
        """The one run: epoch, phase, completion time (the summary's ``end_time``), files."""
        files = await anyio.to_thread.run_sync(self._existing_files)
        summary = await self._read_summary() if SUMMARY_JSON in {f["name"] for f in files} else None
        return {"epoch": self.epoch, "phase": await self.phase(),
                "completedAt": summary.get("end_time") if summary else None, "files": files}

    def _existing_files(self) -> list[dict[str, Any]]:
        out = []
        for name in sorted(self._files):
            try:
                stat = (self._dir / name).stat()
            except OSError:
                continue
            out.append({"name": name, "size": stat.st_size})
        return out

    async def _read_summary(self) -> dict[str, Any] | None:
        """The summary once it is written (then cached: it is written once, atomically)."""
        if self._summary is None:
            try:
                data = await anyio.Path(self._dir / SUMMARY_JSON).read_bytes()
            except FileNotFoundError:
                return None
            doc = orjson.loads(data)
            self._summary = doc if isinstance(doc, dict) else {}
        return self._summary


def live_routes(live: LiveJob) -> list[ControllerRouterHandler]:
    """``GET /api/dashboard/jobs`` (one job) and ``GET /api/dashboard/jobs/{ns}/{name}/runs``
    (its run; another job answers an empty list)."""

    @get(JOBS_PATH)
    async def jobs() -> dict[str, Any]:
        return {"jobs": [await live.job_item()]}

    @get("/api/dashboard/jobs/{ns:str}/{name:str}/runs")
    async def runs(ns: FromPath[str], name: FromPath[str]) -> dict[str, Any]:
        if (ns, name) != (LIVE_NAMESPACE, live.name):
            return {"runs": []}
        return {"runs": [await live.run_item()]}

    return [jobs, runs]


__all__ = ["JOBS_PATH", "LIVE_NAMESPACE", "RUNS_PATH", "LiveJob", "live_routes", "live_source"]
