"""Drives a benchmark through the services, following docs/run-protocol.md."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
import structlog

from aiperf.comms import AskTimeout, PeerUnreachable
from aiperf.config import RunConfig
from aiperf.messages import (
    BuildDataset,
    Finalize,
    Finalized,
    FlushRawRecords,
    PrepareGroup,
    ProfileCancel,
    ProfileConfigure,
    ProfileStart,
    RawPart,
    RawRecordsFlushed,
    RawRecordsUploaded,
    RunAccounting,
    SendShards,
    ServiceType,
    SystemState,
    UploadRawRecords,
    WorkerLost,
)
from aiperf.metrics import RAW_JSONL, RawPartMismatch, join_parts
from aiperf.runtime import CommandError
from aiperf.runtime.control_server import ControlServer
from aiperf.system_controller.plan import plan_services
from aiperf.system_controller.readiness import NotReady, wait_for_model
from aiperf.system_controller.service import RunFailed

log = structlog.get_logger("aiperf.system_controller.profile")

R = TypeVar("R")

DATASET_TIMEOUT_S = 600.0
FINALIZE_TIMEOUT_S = 120.0
RAW_UPLOAD_TIMEOUT_S = 600.0
"""Kubernetes, `--export-level raw`: how long every worker pod has to upload its raw parts."""
RAW_PARTS_DIR = "raw"
"""Folder of the raw parts under the artifact dir (record-processors' locally, uploads in Kubernetes)."""
GROUP_MEMBERS = frozenset({ServiceType.WORKER, ServiceType.RECORD_PROCESSOR})
"""Services configured with their group's dataset folder (the worker-group-manager's reply)."""


@dataclass(kw_only=True)
class ProfileOutcome:
    """What the run produced, for the CLI to print: the accounting (the timing-manager's, then,
    once the exports are written, the records-manager's, where ok counts valid responses only)
    and the records-manager's `Finalized` (None until the exports are written)."""

    accounting: RunAccounting | None = None
    results: Finalized | None = None
    lost_workers: list[str] = field(default_factory=list)
    raw_bytes: int | None = None
    """Size of profile_export_raw.jsonl once the raw barrier passed (`--export-level raw`)."""


def profiling_deadline_s(config: RunConfig) -> float:
    """How long `ProfileStart` may take: every phase's duration and grace period, the
    cancellation drain of each, and a command timeout of slack, when every phase has a duration.
    A phase stopped by a request count has no natural bound (infinity): its requests end by the
    endpoint's timeout, and lost workers and credits are written off by the liveness checks."""
    phases = config.benchmark.phases
    if any(p.duration is None for p in phases):
        return float("inf")
    runtime = config.runtime
    return sum((p.duration or 0) + p.grace_s + runtime.cancel_drain_s for p in phases) + runtime.command_timeout_s


def all_or_raise(replies: dict[str, R | Exception]) -> dict[str, R]:
    """The replies of an `ask_all`, or the first failure among them raised."""
    for reply in replies.values():
        if isinstance(reply, Exception):
            raise reply
    return replies  # type: ignore[return-value]  # no exception left


class ProfileDriver:
    """configure (dataset, then each group's copy, then everyone) -> ready -> profiling (timing-manager) ->
    processing/exporting (with `--aggregation sharded` the shards barrier, `_collect_shards`;
    records-manager `finalize`, then with `--export-level raw` the raw barrier, `_finalize_raw`).
    Cancellation (Ctrl+C) sends `ProfileCancel` and still finalizes, so partial results are
    written. `raw_upload_timeout_s` bounds the Kubernetes raw uploads
    (every worker pod's, together). `before_start` is awaited once every service is configured,
    before the first phase (Kubernetes: the server-metrics container's readiness); `on_started`
    right after the state turned PROFILING."""

    def __init__(self, *, config: RunConfig, on_started: Callable[[], Awaitable[None]] | None = None,
                 before_start: Callable[[], Awaitable[object]] | None = None,
                 raw_upload_timeout_s: float = RAW_UPLOAD_TIMEOUT_S) -> None:
        self._config = config
        self._before_start = before_start
        self._raw_upload_timeout_s = raw_upload_timeout_s
        self._on_started = on_started
        self.outcome = ProfileOutcome()
        self._control: ControlServer | None = None
        self._profiling = False

    def _ids(self, control: ControlServer, service_type: ServiceType) -> list[str]:
        return sorted(sid for sid, info in control.services.items()
                      if info.service_type is service_type and sid not in self.outcome.lost_workers)

    async def drive(self, control: ControlServer, set_state: Callable[[SystemState], Awaitable[None]],
                    cancelled: anyio.Event) -> SystemState:
        self._control = control
        timeout = self._config.runtime.command_timeout_s
        benchmark = self._config.benchmark
        try:
            await wait_for_model(benchmark.endpoint, list(benchmark.models))
        except NotReady as exc:
            raise RunFailed(str(exc)) from None
        await self._configure(control)
        if self._before_start is not None:
            await self._before_start()
        await set_state(SystemState.READY)
        if cancelled.is_set():
            return SystemState.CANCELLED
        (timing_manager,) = self._ids(control, ServiceType.TIMING_MANAGER)
        await set_state(SystemState.PROFILING)
        if self._on_started is not None:
            await self._on_started()
        self._profiling = True
        async with anyio.create_task_group() as tg:

            async def cancel_on_request() -> None:
                await cancelled.wait()
                log.warning("profile.cancelling")
                await control.ask(timing_manager, ProfileCancel(
                    request_id=control.new_request_id("cancel"), reason="cancelled by user"),
                    timeout=timeout)

            tg.start_soon(cancel_on_request)
            finished = await control.ask(timing_manager, ProfileStart(
                request_id=control.new_request_id("start")), timeout=profiling_deadline_s(self._config))
            tg.cancel_scope.cancel()
        self._profiling = False
        accounting = self.outcome.accounting = finished.accounting
        await set_state(SystemState.PROCESSING)
        (records_manager,) = self._ids(control, ServiceType.RECORDS_MANAGER)
        was_cancelled = cancelled.is_set() or accounting.cancelled
        await set_state(SystemState.EXPORTING)
        if benchmark.runtime.aggregation == "sharded":
            await self._collect_shards(control)
        self.outcome.results = await control.ask(records_manager, Finalize(
            request_id=control.new_request_id("finalize"), accounting=accounting,
            was_cancelled=was_cancelled, lost_groups=self._lost_groups(control)),
            timeout=FINALIZE_TIMEOUT_S)
        if self.outcome.results.accounting is not None:  # ok counts valid responses only
            self.outcome.accounting = self.outcome.results.accounting
        if self._config.benchmark.artifacts.export_level == "raw":
            await self._finalize_raw(control)
        return SystemState.CANCELLED if was_cancelled else SystemState.DONE

    async def _collect_shards(self, control: ControlServer) -> None:
        """The shards barrier (`--aggregation sharded`), before `Finalize`: every record-processor
        (but those of worker pods lost with their workers: `Finalize` counts their records as
        lost) queues one `MetricShard` per phase on its `records` socket, the one its records
        go on, and answers; records still on their way to it follow in batches, and `Finalize`
        waits for them as for any record. Raises `RunFailed` with one line when one does not
        answer or fails."""
        lost = set(self._lost_groups(control))
        processors = [sid for sid in self._ids(control, ServiceType.RECORD_PROCESSOR)
                      if control.services[sid].group_id not in lost]
        try:
            sent = all_or_raise(await control.ask_all(
                processors, lambda sid, rid: SendShards(request_id=rid),
                timeout=self._config.runtime.command_timeout_s))
        except (CommandError, AskTimeout, PeerUnreachable) as exc:
            raise RunFailed(f"shards not collected: {exc}") from exc
        log.info("profile.shards_sent", processors=len(sent), shards=sum(r.shards for r in sent.values()),
                 records=sum(r.records for r in sent.values()))

    async def _finalize_raw(self, control: ControlServer) -> None:
        """The raw barrier: every record-processor the run declared (none may be missing) makes
        its raw part durable and acknowledges its size and line count; the parts are checked
        against those sizes and joined into profile_export_raw.jsonl (staged, fsynced, renamed).
        With balanced accounting the lines must number the returned credits. In Kubernetes the
        parts are in the worker pods: `_upload_raw` brings them to the controller's disk first.
        Any failure raises `RunFailed` with one line, so the run fails and no results-ready
        marker is written."""
        declared = [p.service_id for p in plan_services(self._config.services)
                    if p.service_type is ServiceType.RECORD_PROCESSOR]
        missing = sorted(set(declared) - set(self._ids(control, ServiceType.RECORD_PROCESSOR)))
        if missing:
            raise RunFailed(f"raw records incomplete: {', '.join(missing)} did not finalize (gone)")
        try:
            flushed = all_or_raise(await control.ask_all(
                declared, lambda sid, rid: FlushRawRecords(request_id=rid),
                timeout=self._config.runtime.command_timeout_s))
        except (CommandError, AskTimeout, PeerUnreachable) as exc:
            raise RunFailed(f"raw records not finalized: {exc}") from exc
        written = sum(reply.records for reply in flushed.values())
        results, accounting = self.outcome.results, self.outcome.accounting
        if results is not None and results.balanced and accounting is not None:
            expected = sum(phase.returned for phase in accounting.phases.values())
            if written != expected:
                raise RunFailed(f"raw records incomplete: {written} written for {expected} returned credits")
        target = Path(self._config.artifact_dir, RAW_JSONL)
        if self._config.kubernetes:
            parts = await self._upload_raw(control, flushed, target.with_name(RAW_PARTS_DIR))
        else:
            parts = [(reply.path, reply.size) for _, reply in sorted(flushed.items()) if reply.path]
        try:
            self.outcome.raw_bytes = await anyio.to_thread.run_sync(join_parts, target, parts)
        except (OSError, RawPartMismatch) as exc:
            raise RunFailed(f"raw records not finalized: {exc}") from exc
        with contextlib.suppress(OSError):  # the parts' folder, empty now; kept if anything else is there
            target.with_name(RAW_PARTS_DIR).rmdir()
        log.info("profile.raw_finalized", path=str(target), size=self.outcome.raw_bytes, records=written,
                 processors=len(declared))

    async def _upload_raw(self, control: ControlServer, flushed: dict[str, RawRecordsFlushed],
                          into: Path) -> list[tuple[str, int]]:
        """Kubernetes: the acknowledged upload barrier. Every worker-group-manager the run
        declared (one per worker pod) gets `UploadRawRecords` with its group's flushed parts,
        puts them to the api (which stores them under `into`) and answers with the sizes the api
        acknowledged; all are awaited together, bounded by `raw_upload_timeout_s`. Returns the
        parts on this pod's disk, (path, size), in record-processor order. Raises `RunFailed`
        with one line naming every worker pod whose upload is missing, refused, late or not
        the size its record-processor acknowledged."""
        by_group: dict[str, list[RawPart]] = {}
        for sid, reply in sorted(flushed.items()):
            if reply.path:
                group = control.services[sid].group_id if sid in control.services else ""
                by_group.setdefault(group, []).append(RawPart(
                    name=os.path.basename(reply.path), size=reply.size, records=reply.records, path=reply.path))
        managers = {p.service_id: p.group_id for p in plan_services(self._config.services)
                    if p.service_type is ServiceType.WORKER_GROUP_MANAGER}
        present = set(self._ids(control, ServiceType.WORKER_GROUP_MANAGER))
        problems = {sid: "gone before uploading" for sid in managers if sid not in present}
        timeout = self._raw_upload_timeout_s
        replies = await control.ask_all(
            sorted(present & set(managers)),
            lambda sid, rid: UploadRawRecords(request_id=rid, parts=by_group.get(managers[sid], [])),
            timeout=timeout)
        for sid, answer in replies.items():
            sent = {p.name: p.size for p in by_group.get(managers[sid], [])}
            if isinstance(answer, AskTimeout):
                problems[sid] = f"no upload acknowledged within {timeout:g}s"
            elif isinstance(answer, CommandError):
                problems[sid] = answer.error
            elif isinstance(answer, Exception):
                problems[sid] = f"{type(answer).__name__}: {answer}"
            elif isinstance(answer, RawRecordsUploaded) and (
                    got := {p.name: p.size for p in answer.parts}) != sent:
                problems[sid] = f"acknowledged {got or 'no parts'} for the parts {sent or 'none'}"
        if problems:
            raise RunFailed("raw records not uploaded: " + "; ".join(
                f"worker pod {managers[sid]} ({sid}): {why}" for sid, why in sorted(problems.items())))
        log.info("profile.raw_uploaded", pods=len(managers), parts=sum(len(p) for p in by_group.values()))
        return [(str(into / part.name), part.size) for _, group in sorted(by_group.items()) for part in group]

    async def _configure(self, control: ControlServer) -> None:
        """Steps 1-3 of docs/run-protocol.md: the dataset-manager builds the dataset (D); every
        worker-group-manager makes it readable in its group and names the group's folder
        (Kubernetes: a pod-local download; locally: D); then, concurrently, each group's
        workers and record-processors get their group's folder and every other service gets D.

        A worker is dispatchable once it answered this configure: it then has a dataset
        local to its pod open. (The timing-manager's configure also waits for every worker's
        `WorkerConnected`, and credits flow only after every configure answered.)
        Raises `CommandError`/`AskTimeout` for a failed ask, `RunFailed` for a group without a
        worker-group-manager in Kubernetes mode."""
        (dataset_manager,) = self._ids(control, ServiceType.DATASET_MANAGER)
        built = await control.ask(dataset_manager, BuildDataset(
            request_id=control.new_request_id("dataset")), timeout=DATASET_TIMEOUT_S)
        shared_dir = built.dataset_dir
        managers = self._ids(control, ServiceType.WORKER_GROUP_MANAGER)
        groups = all_or_raise(await control.ask_all(
            managers, lambda sid, rid: PrepareGroup(request_id=rid, dataset_dir=shared_dir),
            timeout=DATASET_TIMEOUT_S))
        group_dirs = {control.services[sid].group_id: ready.dataset_dir or shared_dir
                      for sid, ready in groups.items()}
        log.info("profile.groups_ready", groups=sorted(group_dirs), dataset_dir=shared_dir)
        dirs: dict[str, str] = {}
        for sid, info in control.services.items():
            if sid == dataset_manager or sid in managers:
                continue
            dataset_dir = shared_dir
            if info.service_type in GROUP_MEMBERS:
                if info.group_id in group_dirs:
                    dataset_dir = group_dirs[info.group_id]
                elif self._config.kubernetes:
                    raise RunFailed(f"{sid} belongs to group {info.group_id or '(none)'}, which has no "
                                    "worker-group-manager to make the dataset local to its pod")
            dirs[sid] = dataset_dir
        timeout = max(self._config.runtime.command_timeout_s, self._config.runtime.registration_timeout_s + 5)
        all_or_raise(await control.ask_all(
            dirs, lambda sid, rid: ProfileConfigure(request_id=rid, dataset_dir=dirs[sid]), timeout=timeout))

    def _lost_groups(self, control: ControlServer) -> list[str]:
        """Kubernetes: groups (pods) that lost workers; their record-processors may have
        gone with them, so records of returned credits can be missing. Locally a lost
        worker never takes its group's record-processor with it."""
        if not self._config.kubernetes:
            return []
        return sorted({control.services[w].group_id for w in self.outcome.lost_workers
                       if w in control.services})

    async def worker_lost(self, service_id: str, why: str) -> bool:
        """A worker died mid-run: its in-flight credits are declared lost at the
        timing-manager and the run goes on. False when the run cannot absorb it (not
        profiling), so the controller fails the run instead."""
        control = self._control
        if control is None or not self._profiling:
            return False
        self.outcome.lost_workers.append(service_id)
        (timing_manager,) = self._ids(control, ServiceType.TIMING_MANAGER)
        reply = await control.ask(timing_manager, WorkerLost(
            request_id=control.new_request_id("lost"), worker_id=service_id),
            timeout=self._config.runtime.command_timeout_s)
        log.warning("profile.worker_lost", worker=service_id, why=why, lost=reply.lost)
        return True
