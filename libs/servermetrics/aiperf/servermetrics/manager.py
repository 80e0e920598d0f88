"""The server-metrics component of a run: follows the phase broadcasts of the event bus, drives
a `ServerMetricsCollector` around them and writes the exports; and the run's GPU telemetry
(`aiperf.servermetrics.gpu`), scraped the same way, whose exports `close` writes once the
records-manager wrote the summary files it adds to.

Locally it is a task of the controller process (`aiperf.system_controller.runner`), which owns
the run's lifetime and writes the results-ready marker only after `finish` returned; in
Kubernetes it runs alone in the controller pod's `server-metrics-manager` container
(`aiperf.server_metrics_manager.main`, its own service). Either way it is outside the credit path, and nothing it meets
(an unreachable endpoint, a non-Prometheus answer, an unwritable file) fails the benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
import structlog

from aiperf.comms import BadMessage
from aiperf.config import RunConfig
from aiperf.messages import Event, Phase, PhaseComplete, PhaseStarted
from aiperf.servermetrics.collector import Fetch, ServerMetricsCollector
from aiperf.servermetrics.endpoints import endpoints_of
from aiperf.servermetrics.export import build_export, metrics_between, write_exports
from aiperf.servermetrics.gpu import GpuTelemetry
from aiperf.servermetrics.projection import ProjectionLimits, project_for_cr

log = structlog.get_logger("aiperf.servermetrics.manager")

PROJECTION_FILE = ".server_metrics_projection.json"
"""The live CR projection, in the artifact dir (Kubernetes: read by the control plane's status push)."""


class EventSource(Protocol):
    """Events one at a time (`aiperf.comms.Subscriber`)."""

    async def recv(self) -> Event: ...


def topics() -> tuple[bytes, ...]:
    """The event-bus topics the manager needs."""
    return tuple(kind.__struct_config__.tag.encode()  # type: ignore[union-attr]
                 for kind in (PhaseStarted, PhaseComplete))


class ServerMetricsManager:
    """See the module doc. `run` follows `events` until cancelled; `finish` ends collection and
    writes the server-metrics exports (once; also called after the profiling phase completed);
    `close` also finishes the GPU telemetry (after the run's summary files were written).
    `on_update` is told the live projection after every phase change."""

    def __init__(self, *, config: RunConfig, fetch: Fetch, artifact_dir: Path | None = None,
                 on_update: Callable[[dict[str, Any]], None] | None = None,
                 limits: ProjectionLimits | None = None) -> None:
        self._config = config
        self._dir = artifact_dir or Path(config.artifact_dir)
        self._warmup = str(Phase.WARMUP) if config.benchmark.warmup is not None else None
        self._on_update = on_update
        self._limits = limits or ProjectionLimits.from_env()
        self.collector = ServerMetricsCollector(endpoints=endpoints_of(config.benchmark), fetch=fetch,
                                                interval_s=config.benchmark.server_metrics.interval)
        self.gpu = GpuTelemetry.of(config.benchmark, fetch=fetch, artifact_dir=self._dir)
        self.files: list[str] = []
        self._done = self._closed = False

    async def run(self, events: EventSource, *,
                  task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Baseline scrape, then (started) periodic scrapes and the phase boundaries."""
        async with anyio.create_task_group() as tg:
            if self.collector.endpoints:
                await tg.start(self.collector.run)
            if self.gpu is not None:
                await tg.start(self.gpu.run)
            task_status.started()
            while not self._done:
                try:
                    event = await events.recv()
                except BadMessage as exc:
                    log.warning("server_metrics.bad_event", error=str(exc))
                    continue
                except anyio.EndOfStream:
                    break
                match event:
                    case PhaseStarted():
                        # the phase's own start: this event may arrive late on a loaded host
                        self.collector.phase_started(str(event.phase), at_ns=event.started_wall_ns)
                        if self.gpu is not None:
                            self.gpu.phase_started(str(event.phase), at_ns=event.started_wall_ns)
                        self._update()
                    case PhaseComplete():
                        await self.collector.phase_ended(str(event.phase))
                        if self.gpu is not None:
                            await self.gpu.phase_ended(str(event.phase))
                        if event.phase is Phase.PROFILING:
                            await self.finish()
            tg.cancel_scope.cancel()

    def export(self) -> dict[str, Any]:
        """The export document of what was collected so far."""
        return build_export(self.collector, profiling=str(Phase.PROFILING), warmup=self._warmup)

    def projection(self) -> dict[str, Any]:
        """The live CR projection: the latest phase, up to the latest scrape."""
        rounds, phases = self.collector.rounds, self.collector.phases
        doc = self.export()
        if phases:
            phase = list(phases.values())[-1]
            end = phase.end_round if phase.end_round is not None else len(rounds) - 1
            doc["metrics"] = metrics_between(rounds, phase.start_round, end, self.collector.endpoints)
        return project_for_cr(doc, self._limits)

    def _update(self) -> None:
        if self._on_update is not None:
            self._on_update(self.projection())

    async def finish(self) -> list[str]:
        """Stop collecting: the last scrape, then the exports (only when a phase started). Never
        raises for an unwritable file: it is logged and no file is listed."""
        if self._done:
            return self.files
        self._done = True
        if not self.collector.phases or not self.collector.endpoints:
            return self.files
        with anyio.CancelScope(shield=True):
            await self.collector.finish()
        try:
            doc = self.export()
            self.files = await anyio.to_thread.run_sync(write_exports, doc, self._dir,
                                                     self._config.benchmark.server_metrics.formats)
            self._update()
        except OSError as exc:
            log.warning("server_metrics.export_failed", dir=str(self._dir), error=str(exc))
            return self.files
        except Exception:  # a bug of ours here must not cost the benchmark its results
            log.exception("server_metrics.export_bug")
            return self.files
        log.info("server_metrics.exported", files=self.files, metrics=len(doc["metrics"]),
                 errors=doc["endpoint_errors"])
        return self.files

    async def close(self) -> list[str]:
        """`finish`, then the GPU telemetry's last scrape and exports (once; call it after the
        run's summary files were written: the GPU export adds to them). Never raises for an
        unwritable file."""
        files = await self.finish()
        if self.gpu is None or self._closed:
            return files
        self._closed = True
        try:
            self.files = [*files, *await self.gpu.finish()]
        except Exception:  # a bug of ours here must not cost the benchmark its results
            log.exception("gpu_telemetry.export_bug")
        return self.files


def write_projection(directory: Path, projection: dict[str, Any]) -> None:
    """`PROJECTION_FILE` in `directory`, atomically (a reader never sees half of it)."""
    from aiperf.metrics.atomic import write_atomic

    write_atomic(directory / PROJECTION_FILE, json.dumps(projection, separators=(",", ":")).encode())


def read_projection(directory: Path) -> dict[str, Any] | None:
    """The projection `write_projection` left in `directory`, or None (absent or unreadable)."""
    try:
        doc = json.loads((directory / PROJECTION_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
