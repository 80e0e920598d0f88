"""The Litestar app of the results sidecar: a finished run's exports, for as long as the
controller pod lives after the control plane has exited.

Endpoints (errors are JSON, ``{"status_code": n, "detail": "..."}``):
- ``GET /api/status``: `RunEnd.as_json` of the run: whether it has ended and how.
- ``GET /api/results/files``: ``{"files": [{"name": ..., "size": ...}]}``, the export files
  present (a subset of `SERVED_FILES`: a run's `EXPORT_FILES`, or a sweep-controller's
  `SWEEP_AGGREGATE_FILES`); 409 while the run goes on (the exports are not final).
- ``GET /api/results/files/{name}``: one of them (409 while the run goes on, 404 when absent).
- ``POST /shutdown``: 202, then the sidecar exits 0 (`aiperf kube shutdown`, the operator).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from litestar import Litestar, get, post
from litestar.exceptions import ClientException
from litestar.params import FromPath
from litestar.response import File

from aiperf.config.markers import SWEEP_AGGREGATE_FILES
from aiperf.results.files import EXPORT_FILES, MEDIA_TYPES, existing_file, unexpected_logger

SERVED_FILES = EXPORT_FILES | frozenset(SWEEP_AGGREGATE_FILES)


@dataclass(frozen=True, kw_only=True)
class RunEnd:
    """How the run ended, as the sidecar knows it. `how` is `marker` (the control plane's end
    marker: `state`, `exit_code`, `reason` from it) or `controller-gone` (its health port went
    away, or never came up, without a marker: a crash; `exit_code` unknown). `results_ready`:
    the ready marker exists (the exports are final and balanced)."""

    how: str
    state: str | None = None
    exit_code: int | None = None
    reason: str = ""
    results_ready: bool = False
    was_cancelled: bool = False
    partial: bool = False

    @property
    def succeeded(self) -> bool:
        """The control plane exited 0 with final results."""
        return self.exit_code == 0 and self.results_ready

    def as_json(self) -> dict[str, Any]:
        """The ``/api/status`` body of an ended run."""
        return {"ended": True, "how": self.how, "state": self.state, "exit_code": self.exit_code,
                "reason": self.reason, "results_ready": self.results_ready, "was_cancelled": self.was_cancelled,
                "partial": self.partial}


RUNNING_STATUS: dict[str, Any] = {"ended": False, "how": None, "state": None, "exit_code": None, "reason": "",
                                  "results_ready": False, "was_cancelled": False, "partial": False}
"""The ``/api/status`` body while the run goes on."""


def create_results_app(*, artifact_dir: Path, run_end: Callable[[], RunEnd | None],
                       shutdown: Callable[[], None]) -> Litestar:
    """The app over the exports in `artifact_dir`; `run_end()` says whether (and how) the run has
    ended, `shutdown()` asks the sidecar to exit (it returns at once; the reply goes out first)."""

    def ended() -> RunEnd:
        end = run_end()
        if end is None:
            raise ClientException(status_code=409, detail="the run is still going; the exports are not final yet")
        return end

    @get("/api/status", sync_to_thread=False)
    def status() -> dict[str, Any]:
        end = run_end()
        return RUNNING_STATUS if end is None else end.as_json()

    @get("/api/results/files")
    async def files() -> dict[str, Any]:
        ended()
        out = []
        for name in sorted(SERVED_FILES):
            path = anyio.Path(artifact_dir / name)
            if await path.is_file():
                out.append({"name": name, "size": (await path.stat()).st_size})
        return {"files": out}

    @get("/api/results/files/{name:str}")
    async def result_file(name: FromPath[str]) -> File:
        ended()
        path = await existing_file(artifact_dir, name, SERVED_FILES)
        return File(path=path, filename=name, media_type=MEDIA_TYPES.get(path.suffix))

    @post("/shutdown", status_code=202, sync_to_thread=False)
    def stop() -> dict[str, bool]:
        shutdown()
        return {"shutting_down": True}

    return Litestar(route_handlers=[status, files, result_file, stop], logging_config=None,
                    after_exception=[unexpected_logger("results_sidecar.request_failed")], openapi_config=None)


__all__ = ["RUNNING_STATUS", "RunEnd", "create_results_app"]
