"""The records-manager: aggregates metric records exactly, streams `profile_export.jsonl`,
publishes progress, and on `finalize` writes the summary exports and checks that every
credit is accounted for."""

from __future__ import annotations

import contextlib
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

from aiperf.comms import BadMessage
from aiperf.config import Benchmark
from aiperf.messages import (
    ClientLoad,
    Command,
    Event,
    Finalize,
    Finalized,
    MetricRecord,
    MetricRecordBatch,
    MetricShard,
    Phase,
    PhaseAccounting,
    ProfileConfigure,
    Progress,
    Reply,
)
from aiperf.metrics import (
    Aggregator,
    JsonlRecordWriter,
    OslMismatchThresholds,
    Summary,
    client_saturation,
    render_console_tables,
    saturation_line,
    write_atomic,
    write_summary_csv,
    write_summary_json,
)
from aiperf.metrics.timeslices import TimesliceRecords, write_timeslices
from aiperf.records_manager.accounting import (
    accounting_line,
    balance_problems,
    missing_records,
    with_response_errors,
)
from aiperf.runtime import UnknownCommand

log = structlog.get_logger("aiperf.records_manager")

SUMMARY_JSON = "profile_export_aiperf.json"
SUMMARY_CSV = "profile_export_aiperf.csv"
RECORDS_JSONL = "profile_export.jsonl"
CONSOLE_TXT = "profile_export_console.txt"
RECORDS_WAIT_S = 30.0
"""How long `finalize` waits for the record of every returned credit."""
IDENTIFY_WAIT_S = 3.0
"""How long `finalize` waits for the server's identity when the probe is still running."""
LOST_POD_RECORDS_WAIT_S = 5.0
"""The same when pods were lost: some records went with their record-processor."""


class ExportError(Exception):
    """The exports cannot be written (a full disk, a read-only or vanished directory): the run
    fails naming the file and the reason; nothing half-written is left behind."""


class RecordSource(Protocol):
    """Where metric records come from (a `PullSocket` in production); may raise `BadMessage`."""

    async def recv(self) -> MetricRecordBatch | MetricShard: ...


class EventSink(Protocol):
    async def publish(self, event: Event) -> None: ...


class RecordsManager:
    """Consumes every `MetricRecord` of run `run_id` measuring `benchmark`; they come in
    `MetricRecordBatch`es, each record taken in order as if it had come alone, or aggregated in
    `MetricShard`s, each merged into the aggregator and counted (progress, accounting) as its
    `records` records, its rendered jsonl lines appended as they are. Timeslices
    (`slice_duration`) need the records themselves: a shard's records are left out of them
    (logged once).

    The aggregated values are spilled to unnamed temporary files in `artifact_dir` a block at a
    time (`Aggregator(spill=...)`: memory holds a block per metric, not the run; the system
    removes the files with the process). Records are written to `profile_export.jsonl` as they arrive (the file is complete even
    if the run is cancelled), unless the benchmark's export level is `summary`. `Finalize` waits (bounded) for one record per returned credit,
    then writes the summary (JSON, CSV) and the console tables (`profile_export_console.txt`).
    `t0_wall_ns` (0: unknown) is when the command started, for the start-up figure;
    `osl_mismatch` decides `osl_mismatch_count` (None: AIPerf's defaults). `identify` (blocking,
    run once in a worker thread when `run` starts) tells what the server is
    (`aiperf.servermetrics.identity`); the summary exports it as `aiperf_extensions.server`
    (None when the probe failed or had not ended `IDENTIFY_WAIT_S` into `Finalize`).
    """

    def __init__(self, *, benchmark: Benchmark, run_id: str, t0_wall_ns: int, records: RecordSource,
                 events: EventSink | None, artifact_dir: Path, progress_interval_s: float = 1.0,
                 wall_clock: Callable[[], int] = time.time_ns,
                 osl_mismatch: OslMismatchThresholds | None = None,
                 identify: Callable[[], dict[str, Any]] | None = None) -> None:
        self._benchmark, self._run_id, self._t0_wall_ns = benchmark, run_id, t0_wall_ns
        self._osl_mismatch = osl_mismatch
        self._identify = identify
        self._server: dict[str, Any] | None = None
        self._identified = anyio.Event()
        self._records, self._events = records, events
        self._dir, self._interval, self._wall = artifact_dir, progress_interval_s, wall_clock
        self._aggregator = Aggregator(spill=artifact_dir)  # the values leave memory a block at a time (unnamed files)
        slice_s = benchmark.artifacts.slice_duration
        self._slices = TimesliceRecords(slice_s) if slice_s else None
        self._writer: JsonlRecordWriter | None = None
        self._write_error = ""
        self._seen: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._response_errors: Counter[str] = Counter()
        self._first_start_wall_ns = math.inf
        self._arrived = anyio.Event()
        self._loads: dict[str, ClientLoad] = {}
        self._shards_unsliced = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Receive records and publish progress until cancelled; closes the jsonl file. An
        undecodable frame is logged and skipped."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._progress_loop)
                if self._identify is not None:
                    tg.start_soon(self._identify_server, self._identify)
                task_status.started()
                while True:
                    try:
                        batch = await self._records.recv()
                    except BadMessage as exc:  # the socket listens on the network in Kubernetes
                        log.warning("records.bad_message", channel=exc.channel, reason=exc.reason)
                        continue
                    if isinstance(batch, MetricShard):
                        self._take_shard(batch)
                        await self._publish_progress()  # its records came at once: said now, not at the next tick
                    else:
                        self._take_batch(batch.records)
                    self._arrived.set()
                    self._arrived = anyio.Event()
        finally:
            if self._writer is not None:
                self._writer.close()

    def _take_batch(self, records: list[MetricRecord]) -> None:
        """Take a batch's records in order: each is aggregated, written and counted as if it
        had come alone (the aggregator and the writer take them as one batch)."""
        self._aggregator.add_batch(records)
        if self._slices is not None:
            self._slices.add_batch(records)
        if self._writer is not None:
            try:
                self._writer.write_many(records)
            except OSError as exc:
                self._give_up_records(exc)
        seen, errors, loads, response_errors = self._seen, self._errors, self._loads, self._response_errors
        first_start = self._first_start_wall_ns
        for record in records:
            seen[record.phase] += 1
            load = record.client_load
            if load is not None:  # cumulative per worker; processors may deliver them out of order
                known = loads.get(record.worker_id)
                if known is None or load.ticks >= known.ticks:
                    loads[record.worker_id] = load
            if record.error is not None:
                errors[record.phase] += 1
                if record.response_error:
                    response_errors[record.phase] += 1
            start = record.metadata.get("request_start_ns") or record.start_wall_ns
            if isinstance(start, int) and start and start < first_start:
                first_start = start
        self._first_start_wall_ns = first_start

    def _take_shard(self, shard: MetricShard) -> None:
        """Merge a record-processor's shard and count its records as `_take_batch` counts them;
        a malformed one is logged and skipped (nothing of it taken)."""
        try:
            check_counts(shard)
            self._aggregator.merge(shard.shard)
        except ValueError as exc:
            log.warning("records.bad_shard", phase=shard.phase, records=shard.records, reason=str(exc))
            return
        if self._slices is not None and not self._shards_unsliced:
            self._shards_unsliced = True
            log.warning("records.shards_not_in_timeslices", reason="a shard carries no per-record times")
        if self._writer is not None:
            try:
                self._writer.write_lines(shard.jsonl, shard.records)
            except OSError as exc:
                self._give_up_records(exc)
        self._seen[shard.phase] += shard.records
        self._errors[shard.phase] += shard.errors
        self._response_errors[shard.phase] += shard.response_errors
        for worker, load in shard.client_loads.items():
            known = self._loads.get(worker)
            if known is None or load.ticks >= known.ticks:
                self._loads[worker] = load
        if shard.first_start_wall_ns and shard.first_start_wall_ns < self._first_start_wall_ns:
            self._first_start_wall_ns = shard.first_start_wall_ns

    async def _identify_server(self, identify: Callable[[], dict[str, Any]]) -> None:
        try:
            self._server = await anyio.to_thread.run_sync(identify, abandon_on_cancel=True)
            log.info("records.server", server=self._server.get("server"), version=self._server.get("version"))
        except Exception as exc:  # what the server is must never cost the run its results
            log.warning("records.identify_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._identified.set()

    def _give_up_records(self, exc: OSError) -> None:
        """Stop writing the jsonl after a failed write: its file goes (a cut line must not pass
        for an export); aggregation goes on and `Finalize` fails naming the reason."""
        assert self._writer is not None
        self._write_error = f"{self._dir / RECORDS_JSONL}: {exc.strerror or exc}"
        log.error("records.jsonl_write_failed", error=self._write_error)
        self._writer.discard()
        self._writer = None

    async def _progress_loop(self) -> None:
        while True:
            await anyio.sleep(self._interval)
            await self._publish_progress()

    async def _publish_progress(self) -> None:
        """`Progress` of the latest phase with records (nothing before the first record)."""
        if self._events is not None and self._seen:
            phase = Phase.PROFILING if self._seen[Phase.PROFILING] else Phase.WARMUP
            await self._events.publish(Progress(phase=phase, completed=self._seen[phase],
                                                errors=self._errors[phase]))

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`ProfileConfigure` opens the jsonl file (export level records or raw); `Finalize` writes
        the exports."""
        match command:
            case ProfileConfigure():
                if self._benchmark.artifacts.export_level == "summary":
                    with contextlib.suppress(OSError):  # the spill files' directory (else they stay in memory)
                        self._dir.mkdir(parents=True, exist_ok=True)
                    return None
                try:
                    self._dir.mkdir(parents=True, exist_ok=True)
                    self._writer = JsonlRecordWriter(self._dir / RECORDS_JSONL)
                except OSError as exc:
                    raise ExportError(f"cannot create {self._dir / RECORDS_JSONL}: {exc.strerror or exc}") from exc
                return None
            case Finalize():
                return await self._finalize(command)
        raise UnknownCommand(f"the records-manager does not handle {type(command).__name__}")

    async def _wait_for_records(self, expected: dict[Phase, int], timeout: float) -> None:
        with anyio.move_on_after(timeout):
            while any(self._seen[p] < n for p, n in expected.items()):
                await self._arrived.wait()

    async def _finalize(self, command: Finalize) -> Finalized:
        accounting = command.accounting
        phases: dict[Phase, PhaseAccounting] = accounting.phases
        was_cancelled = command.was_cancelled or accounting.cancelled
        lost_groups = list(command.lost_groups)
        wait = command.records_timeout_s
        if wait is None:
            wait = LOST_POD_RECORDS_WAIT_S if lost_groups else RECORDS_WAIT_S
        await self._wait_for_records({p: c.returned for p, c in phases.items()}, wait)
        if self._identify is not None:
            with anyio.move_on_after(IDENTIFY_WAIT_S):
                await self._identified.wait()
        if self._writer is not None:
            try:
                self._writer.flush()
            except OSError as exc:
                self._give_up_records(exc)
        if self._write_error:
            raise ExportError(f"cannot write the exports: {self._write_error}")
        seen = {Phase(p): n for p, n in self._seen.items()}
        response_errors = {Phase(p): n for p, n in self._response_errors.items()}
        phases = with_response_errors(phases, response_errors)
        problems = balance_problems(phases, seen, records_may_be_lost=bool(lost_groups))
        missing = missing_records(phases, seen) if lost_groups else {}
        prof = phases.get(Phase.PROFILING, PhaseAccounting())
        duration = self._aggregator.observed_duration_s()
        if duration <= 0:
            duration = max(0.0, (prof.end_ns - prof.start_ns) / 1e9)
        summary = self._aggregator.summary(benchmark_duration_s=duration, goodput=dict(self._benchmark.slos),
                                           osl_mismatch=self._osl_mismatch)
        startup_s = None
        if self._t0_wall_ns and math.isfinite(self._first_start_wall_ns):
            startup_s = (self._first_start_wall_ns - self._t0_wall_ns) / 1e9
        saturation = client_saturation(self._loads)
        extras = {"accounting": msgspec.to_builtins(phases), "accounting_balanced": not problems,
                  "accounting_problems": problems, "startup_to_first_request_s": startup_s,
                  "stopped_reason": accounting.stopped_reason,
                  "records_lost_with_pods": {str(p): n for p, n in missing.items()}, "lost_groups": lost_groups,
                  "client_saturation": saturation, "server": self._server}
        start = dt.datetime.fromtimestamp((prof.start_wall_ns or self._wall()) / 1e9, dt.UTC)
        end = dt.datetime.fromtimestamp((prof.end_wall_ns or self._wall()) / 1e9, dt.UTC)
        input_config = msgspec.to_builtins(self._benchmark)
        table = render_table(summary, trace_timing=self._benchmark.artifacts.show_trace_timing)
        try:
            write_summary_json(self._dir / SUMMARY_JSON, summary, input_config, None, start, end,
                               was_cancelled, extras, benchmark_id=self._run_id)
            write_summary_csv(self._dir / SUMMARY_CSV, summary)
            write_atomic(self._dir / CONSOLE_TXT, table.encode())
            sliced = [] if self._slices is None else write_timeslices(
                self._dir, self._slices.slices(goodput=self._benchmark.slos, osl_mismatch=self._osl_mismatch),
                input_config)
        except OSError as exc:
            raise ExportError(f"cannot write the exports in {self._dir}: {exc.strerror or exc}") from exc
        lost_line = (f"; records lost with pods {', '.join(lost_groups)}: "
                     f"{ {str(p): n for p, n in missing.items()} }" if missing else "")
        return Finalized(
            table=table, accounting_line=accounting_line(phases, response_errors) + lost_line,
            balanced=not problems, problems=problems, overhead_line="\n".join(
                filter(None, (overhead_line(summary), saturation_line(saturation)))),
            startup_s=startup_s, request_count=summary.request_count,
            error_request_count=summary.error_request_count, artifact_dir=str(self._dir),
            files=[SUMMARY_JSON, SUMMARY_CSV, *([RECORDS_JSONL] if self._writer is not None else []),
                   CONSOLE_TXT, *sliced],
            accounting=msgspec.structs.replace(accounting, phases=phases))


def check_counts(shard: MetricShard) -> None:
    """Raise `ValueError` unless the shard's counts agree: its aggregate holds exactly `records`
    records, all warmup ones for the warmup phase and none for the profiling phase, and (profiling)
    `errors` of them failed, `response_errors` of those in the response."""
    agg = shard.shard
    failed = sum(n for _, n in agg.errors)
    if agg.success_count + failed + agg.cancelled + agg.warmup != shard.records:
        raise ValueError(f"a shard of {shard.records} records whose aggregate holds another number")
    if agg.warmup != (shard.records if shard.phase == Phase.WARMUP else 0):
        raise ValueError(f"a {shard.phase} shard whose aggregate holds records of the other phase")
    if (shard.phase == Phase.PROFILING and shard.errors != failed) or not 0 <= shard.response_errors <= shard.errors:
        raise ValueError("a shard whose error counts disagree with its aggregate")


def render_table(summary: Summary, width: int = 120, *, trace_timing: bool = False) -> str:
    """The console tables as plain text (the CLI prints it; `profile_export_console.txt`);
    `trace_timing` adds the HTTP trace timing table."""
    from rich.console import Console  # not at import: the zygote imports this module without rich

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    for table in render_console_tables(summary, trace_timing=trace_timing):
        console.print(table)
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
