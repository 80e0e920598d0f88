"""The records-manager: aggregates metric records exactly, streams `profile_export.jsonl`,
publishes progress, and on `finalize` writes the summary exports and checks that every
credit is accounted for."""

from __future__ import annotations

import datetime as dt
import io
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus
from rich.console import Console

from aiperf.config import RunConfig
from aiperf.messages import (
    Command,
    Event,
    MetricRecord,
    Phase,
    ProfileConfigure,
    Progress,
    ServiceCommand,
)
from aiperf.metrics import (
    Aggregator,
    JsonlRecordWriter,
    Summary,
    render_console_table,
    write_summary_csv,
    write_summary_json,
)
from aiperf.records_manager.accounting import accounting_line, balance_problems, missing_records

log = structlog.get_logger("aiperf.records_manager")

SUMMARY_JSON = "profile_export_aiperf.json"
SUMMARY_CSV = "profile_export_aiperf.csv"
RECORDS_JSONL = "profile_export.jsonl"
RECORDS_WAIT_S = 30.0
"""How long `finalize` waits for the record of every returned credit."""
LOST_POD_RECORDS_WAIT_S = 5.0
"""The same when pods were lost: some records went with their record-processor."""


class RecordSource(Protocol):
    async def recv(self) -> MetricRecord: ...


class EventSink(Protocol):
    async def publish(self, event: Event) -> None: ...


class RecordsManager:
    """Consumes every `MetricRecord` of the run.

    Records are written to `profile_export.jsonl` as they arrive (the file is complete even
    if the run is cancelled). `finalize` waits (bounded) for one record per returned credit.
    """

    def __init__(self, *, config: RunConfig, records: RecordSource, events: EventSink | None,
                 artifact_dir: Path, progress_interval_s: float = 1.0,
                 wall_clock: Callable[[], int] = time.time_ns) -> None:
        self._config, self._records, self._events = config, records, events
        self._dir, self._interval, self._wall = artifact_dir, progress_interval_s, wall_clock
        self._aggregator = Aggregator()
        self._writer: JsonlRecordWriter | None = None
        self._seen: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._first_start_wall_ns = math.inf
        self._arrived = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Receive records and publish progress until cancelled; closes the jsonl file."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._progress_loop)
                task_status.started()
                while True:
                    self._take(await self._records.recv())
        finally:
            if self._writer is not None:
                self._writer.close()

    def _take(self, record: MetricRecord) -> None:
        self._aggregator.add(record)
        if self._writer is not None:
            self._writer.write(record)
        self._seen[record.phase] += 1
        if record.error is not None:
            self._errors[record.phase] += 1
        start = record.metadata.get("request_start_ns") or record.start_wall_ns
        if isinstance(start, int) and start:
            self._first_start_wall_ns = min(self._first_start_wall_ns, start)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def _progress_loop(self) -> None:
        while True:
            await anyio.sleep(self._interval)
            if self._events is not None and self._seen:
                phase = Phase.PROFILING if self._seen[Phase.PROFILING] else Phase.WARMUP
                await self._events.publish(Progress(phase=phase, completed=self._seen[phase],
                                                    errors=self._errors[phase]))

    async def handle(self, command: Command) -> dict[str, Any]:
        """`ProfileConfigure` opens the jsonl file; `finalize` writes the exports."""
        match command:
            case ProfileConfigure():
                self._dir.mkdir(parents=True, exist_ok=True)
                self._writer = JsonlRecordWriter(self._dir / RECORDS_JSONL)
                return {}
            case ServiceCommand(name="finalize"):
                return await self._finalize(command.args)
        raise ValueError(f"records-manager does not handle {type(command).__name__}")

    async def _wait_for_records(self, expected: dict[str, int], timeout: float) -> None:
        with anyio.move_on_after(timeout):
            while any(self._seen[p] < n for p, n in expected.items()):
                await self._arrived.wait()

    async def _finalize(self, args: dict[str, Any]) -> dict[str, Any]:
        accounting: dict[str, Any] = args.get("accounting", {})
        phases: dict[str, dict[str, Any]] = accounting.get("phases", {})
        was_cancelled = bool(args.get("was_cancelled")) or bool(accounting.get("cancelled"))
        lost_groups: list[str] = list(args.get("lost_groups", []))
        default_wait = LOST_POD_RECORDS_WAIT_S if lost_groups else RECORDS_WAIT_S
        await self._wait_for_records({p: c.get("returned", 0) for p, c in phases.items()},
                                     float(args.get("records_timeout_s", default_wait)))
        if self._writer is not None:
            self._writer.flush()
        problems = balance_problems(phases, dict(self._seen), records_may_be_lost=bool(lost_groups))
        missing = missing_records(phases, dict(self._seen)) if lost_groups else {}
        profile = self._config.profile
        duration = self._aggregator.observed_duration_s()
        if duration <= 0:
            prof = phases.get(Phase.PROFILING, {})
            duration = max(0.0, (prof.get("end_ns", 0) - prof.get("start_ns", 0)) / 1e9)
        summary = self._aggregator.summary(benchmark_duration_s=duration,
                                           goodput=dict(profile.goodput) if profile else None)
        startup_s = None
        if self._config.t0_wall_ns and math.isfinite(self._first_start_wall_ns):
            startup_s = (self._first_start_wall_ns - self._config.t0_wall_ns) / 1e9
        extras = {"accounting": phases, "accounting_balanced": not problems,
                  "accounting_problems": problems, "startup_to_first_request_s": startup_s,
                  "stopped_reason": accounting.get("stopped_reason", ""),
                  "records_lost_with_pods": missing, "lost_groups": lost_groups}
        prof = phases.get(Phase.PROFILING, {})
        start = dt.datetime.fromtimestamp(prof.get("start_wall_ns", self._wall()) / 1e9, dt.UTC)
        end = dt.datetime.fromtimestamp(prof.get("end_wall_ns", self._wall()) / 1e9, dt.UTC)
        input_config = msgspec.to_builtins(profile) if profile else {}
        write_summary_json(self._dir / SUMMARY_JSON, summary, input_config, None, start, end,
                           was_cancelled, extras, benchmark_id=self._config.run_id)
        write_summary_csv(self._dir / SUMMARY_CSV, summary)
        return {
            "table": render_table(summary),
            "accounting_line": accounting_line(phases) + (
                f"; records lost with pods {', '.join(lost_groups)}: {missing}" if missing else ""),
            "balanced": not problems,
            "problems": problems,
            "overhead_line": overhead_line(summary),
            "startup_s": startup_s,
            "request_count": summary.request_count,
            "error_request_count": summary.error_request_count,
            "artifact_dir": str(self._dir),
            "files": [SUMMARY_JSON, SUMMARY_CSV, RECORDS_JSONL],
        }


def render_table(summary: Summary, width: int = 120) -> str:
    """The console table as plain text (the CLI prints it)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(
        render_console_table(summary))
    return buffer.getvalue()


def overhead_line(summary: Summary) -> str:
    """Client overhead (credit-to-send) and, for scheduled loads, schedule lag, p50/p99 in ms."""
    parts = []
    for tag, label in (("credit_to_send_delay", "client overhead (credit-to-send)"),
                       ("schedule_lag", "schedule lag")):
        stats = summary.get(tag)
        if stats is not None and stats.count:
            p50, p99 = stats.stat("p50"), stats.stat("p99")
            parts.append(f"{label} p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    return "; ".join(parts)
