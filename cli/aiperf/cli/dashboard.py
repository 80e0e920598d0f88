"""`--ui dashboard`: a live terminal view of a local run, drawn with rich's `Live`.

Phases with progress bars and requests/s, running TTFT/ITL/latency percentiles, the services
(workers and record-processors one row each) with the age of their last heartbeat, errors by
type and the tail of the logs. The `Dashboard` is a `RunObserver` of the run (the controller's
states and registry, the event bus) and owns the display while `show` runs. On a terminal it
redraws a few times a second; elsewhere (a pipe, a CI log) rich prints only the last frame, once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
import structlog
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from aiperf.cli.dashboard_state import METRICS, DashboardState, LineTail
from aiperf.comms import BadMessage
from aiperf.config import RunConfig
from aiperf.messages import (
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    ServiceState,
    ServiceType,
    SystemState,
)

if TYPE_CHECKING:
    from aiperf.system_controller.runner import EventSource
    from aiperf.system_controller.service import SystemController

RECORDS = "profile_export.jsonl"
MAX_SERVICE_ROWS = 12
WIDE = 110
"""Terminal columns from which metrics and workers sit side by side."""
GROUP_TYPES = (ServiceType.WORKER, ServiceType.RECORD_PROCESSOR)


class LogSink:
    """structlog's output while the dashboard shows: lines go to its log pane; before and after,
    to `fallback` (stderr)."""

    def __init__(self, state: DashboardState, fallback: TextIO) -> None:
        self._state, self._fallback, self.live, self._rest = state, fallback, False, ""

    def write(self, text: str) -> int:
        if not self.live:
            return self._fallback.write(text)
        *lines, self._rest = (self._rest + text).split("\n")
        self._state.add_log_lines(lines)
        return len(text)

    def flush(self) -> None:
        if not self.live:
            self._fallback.flush()


class Dashboard:
    """Observer of one run and its live display (see the module doc)."""

    TOPICS = tuple(kind.__struct_config__.tag.encode()  # type: ignore[union-attr]
                   for kind in (PhaseStarted, PhaseSendingComplete, PhaseComplete, Progress))

    def __init__(self, *, config: RunConfig, console: Console | None = None, refresh_s: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config, self._refresh_s, self._clock = config, refresh_s, clock
        self._console = console or Console()
        self.state = DashboardState(clock=clock)
        self._controller: SystemController | None = None
        artifacts = Path(config.artifact_dir)
        self._records = LineTail(artifacts / RECORDS)
        self._log_dir = artifacts / "logs"
        self._logs: dict[Path, LineTail] = {}
        self._sink = LogSink(self.state, sys.stderr)

    def capture_logs(self) -> None:
        """Route this process's structlog output to the log pane while the dashboard shows
        (call right after `configure_logging`, before anything logs)."""
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=self._sink))  # type: ignore[arg-type]

    def watch(self, controller: SystemController) -> None:
        """Show `controller`'s services and their heartbeats."""
        self._controller = controller

    async def on_state(self, state: SystemState) -> None:
        """The controller moved to `state`."""
        self.state.state = state

    async def follow(self, events: EventSource) -> None:
        """Apply every broadcast of `events` until cancelled."""
        while True:
            try:
                event = await events.recv()
            except BadMessage:  # a broadcast we cannot read: the next one will do
                continue
            except anyio.EndOfStream:
                return
            self.state.apply(event)

    async def show(self) -> None:
        """Draw until cancelled; the last frame stays on the screen."""
        live = Live(self.render(), console=self._console, auto_refresh=False, transient=False,
                    redirect_stdout=True, redirect_stderr=True, vertical_overflow="crop")
        with live:
            self._sink.live = True
            try:
                while True:
                    self.poll()
                    live.update(self.render(), refresh=True)
                    await anyio.sleep(self._refresh_s)
            finally:
                self._sink.live = False
                self.poll()
                live.update(self.render(), refresh=True)

    def poll(self) -> None:
        """Read what the records-manager and the services appended to their files."""
        self.state.add_records(self._records.read())
        try:
            names = sorted(self._log_dir.glob("*.log"))
        except OSError:
            names = []
        for path in names:
            tail = self._logs.setdefault(path, LineTail(path))
            self.state.add_log_lines(tail.read())

    def render(self) -> RenderableType:
        """One frame."""
        now = self._clock()
        body: list[RenderableType] = [self._phases(now)]
        if self._console.width >= WIDE:
            grid = Table.grid(padding=(0, 2), expand=False)
            grid.add_row(self._metrics(), self._services(now))
            body.append(grid)
        else:
            body += [self._metrics(), self._services(now)]
        if self.state.errors:
            body.append(self._errors())
        body.append(self._log_pane())
        return Panel(Group(*body), title=self._title(now), title_align="left", border_style="cyan")

    def _title(self, now: float) -> str:
        bench = self._config.benchmark
        return (f"[bold]aiperf profile[/] {bench.models[0]} @ {bench.endpoint.url}  "
                f"state [bold]{self.state.state}[/]  {now - self.state.started:.1f} s")

    def _phases(self, now: float) -> RenderableType:
        if not self.state.phases:
            return Text(f"Phases: waiting for the services to start ({self.state.state})", style="dim")
        table = Table(title="Phases", title_justify="left", expand=True, show_edge=False)
        for name in ("phase", "progress", "done", "requests", "errors", "req/s", "elapsed"):
            table.add_column(name, justify="left" if name in ("phase", "progress", "done") else "right",
                             ratio=3 if name == "progress" else None)
        for phase, view in self.state.phases.items():
            fraction = view.fraction(now)
            bar: RenderableType = ProgressBar(total=1.0, completed=fraction) if fraction is not None \
                else ProgressBar(total=None)
            total = f"/{view.expected}" if view.expected else ""
            table.add_row(str(phase), bar, f"{fraction * 100:.0f}%" if fraction is not None else "-",
                          f"{view.completed}{total}", str(view.errors), f"{view.rate(now):.2f}",
                          f"{view.elapsed(now):.1f} s")
        return table

    def _metrics(self) -> RenderableType:
        phase = self.state.current
        table = Table(title=f"Metrics ({phase or 'no phase yet'}, ms)", title_justify="left")
        for name in ("metric", "avg", "p50", "p90", "p99", "n"):
            table.add_column(name, justify="left" if name == "metric" else "right")
        if self._config.benchmark.artifacts.export_level == "summary":
            table.add_row(Text("n/a with --export-level summary", style="dim"), "", "", "", "", "")
            return table
        values = self.state.metrics.get(phase, {}) if phase is not None else {}
        for tag, label in METRICS:
            stats = values[tag].percentiles() if tag in values else None
            if stats is None:
                table.add_row(label, "-", "-", "-", "-", "0")
                continue
            table.add_row(label, *(f"{stats[k]:.2f}" for k in ("avg", "p50", "p90", "p99")),
                          str(len(values[tag].values)))
        return table

    def _services(self, now: float) -> RenderableType:
        table = Table(title="Workers", title_justify="left")
        for name in ("service", "state", "heartbeat"):
            table.add_column(name, justify="right" if name == "heartbeat" else "left")
        controller = self._controller
        if controller is None:
            table.add_row(Text("not started", style="dim"), "", "")
            return table
        services, lost = controller.services, controller.lost
        stale_s = 3 * self._config.runtime.heartbeat_interval_s
        rows = others = healthy_others = 0
        for planned in controller.planned:
            info = services.get(planned.service_id)
            if planned.service_type not in GROUP_TYPES:
                others += 1
                healthy_others += info is not None and info.state is ServiceState.RUNNING
                continue
            if rows >= MAX_SERVICE_ROWS:
                continue
            rows += 1
            if info is None:
                table.add_row(planned.service_id, Text("not registered", style="yellow"), "-")
                continue
            age = now - info.last_seen if info.last_seen else None
            if planned.service_id in lost:
                state = Text("lost", style="bold red")
            elif info.state is ServiceState.FAILED:
                state = Text(f"failed: {info.error}"[:40], style="bold red")
            elif age is not None and age > stale_s and info.state is ServiceState.RUNNING:
                state = Text("silent", style="yellow")
            else:
                state = Text(str(info.state), style="green" if info.state is ServiceState.RUNNING else "")
            table.add_row(planned.service_id, state, f"{age:.1f} s ago" if age is not None else "-")
        hidden = sum(p.service_type in GROUP_TYPES for p in controller.planned) - rows
        if hidden > 0:
            table.add_row(Text(f"... {hidden} more", style="dim"), "", "")
        table.add_row(Text("other services", style="dim"), f"{healthy_others}/{others} running", "")
        return table

    def _errors(self) -> Table:
        table = Table(title="Errors by type", title_justify="left")
        table.add_column("error")
        table.add_column("count", justify="right")
        for kind, count in self.state.errors.most_common(6):
            table.add_row(Text(kind, style="red"), str(count))
        return table

    def _log_pane(self) -> Panel:
        lines = list(self.state.logs)
        text = Text("\n".join(lines), overflow="ellipsis", no_wrap=True) if lines else \
            Text(f"no log lines yet (--log-level {self._config.runtime.log_level}; logs in {self._log_dir})",
                 style="dim")
        return Panel(text, title="Log", title_align="left", border_style="dim")
