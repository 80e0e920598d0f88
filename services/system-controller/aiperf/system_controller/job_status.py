"""Operator mode: the run's own part of its AIPerfJob's status, pushed from the controller.

The system-controller is the process that lives from the first registration to the verdict, so
it reports: `RunTracker` turns what it knows (its `SystemState`, the registrations, the phase and
progress broadcasts of the event bus, the verdict and the exports) into the controller-owned
status keys, and `reporting` wires a `aiperf.kuberun.status_push.StatusReporter` to push them
(every few seconds, and at once on a state or phase change) when the environment names the CR.
Status is advisory: a push that fails is logged and retried, it never fails the benchmark, and
nothing here is on the credit path (the timing-manager and workers are other processes).

What each key says:
- `subPhase`: the controller's `SystemState`; `currentPhase`: the benchmark phase (its name in
  the config) that started last, always a key of `phases`.
- `phases.<name>`: `phaseKind`, `phaseIndex` (position in the config), `profilingIndex` (among
  profiling-kind phases), `startTime`/`endTime` (when the controller heard the phase start and
  finish), `requestsTotal` (the phase's request count, when it has one), `requestsCompleted`
  (requests finished any way: records seen while running, the timing-manager's accounting at
  the end), `requestsFailed`, `requestsCancelled` and `requestsSent` (once known), and
  `requestsPerSecond` (completed over the phase's elapsed time).
- top level `requestsCompleted`/`requestsTotal`/`requestsPerSecond`/`progressPercent`: the
  profiling-kind phase's (by count, or by time for a phase with a duration).
- `workers` (all nine keys, so `totalPods` marks the controller's takeover): planned workers,
  record processors and worker pods (groups); registered and running ones not written off;
  `dispatchable` and `routerConnected` are the ready workers once configured (the
  timing-manager's configure waits for every worker's credit connection); `degradedPods` are
  pods that lost a member. Frozen when the run starts stopping (services stop then).
- `controllerFailure` (the verdict's reason) when the run failed; `resultsExported` once the
  run ended: whether the exports were written.
- `serverMetrics`: the latest curated projection of the server metrics, as the
  server-metrics-manager container last left it in the artifacts volume
  (`aiperf.servermetrics.manager.PROJECTION_FILE`; absent until its first write).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog

from aiperf.comms import BadMessage
from aiperf.config import Phase as PhaseSpec
from aiperf.config import PhaseKind, RunConfig
from aiperf.crd.model import AIPerfJobStatus, ControllerFailure, PhaseStatus, WorkersStatus
from aiperf.kubeapi import InClusterConfig, InClusterError, in_cluster
from aiperf.kuberun.status_push import JobRef, StatusReporter, timestamp
from aiperf.messages import (
    Event,
    Phase,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    ServiceState,
    ServiceType,
    SystemState,
)
from aiperf.progress import PhaseProgress, RunProgress
from aiperf.servermetrics.manager import read_projection
from aiperf.system_controller.plan import plan_services
from aiperf.system_controller.profile_driver import ProfileOutcome
from aiperf.system_controller.service import SystemController, Verdict

log = structlog.get_logger("aiperf.system_controller.job_status")

_STOPPED = frozenset({SystemState.STOPPING, SystemState.DONE, SystemState.FAILED, SystemState.CANCELLED})


class EventSource(Protocol):
    """Events, one at a time (`aiperf.comms.Subscriber`): `recv` raises `BadMessage` for an
    undecodable one and `anyio.EndOfStream` when there are no more."""

    async def recv(self) -> Event: ...


@dataclass(frozen=True, kw_only=True)
class _Accounted:
    """A phase's exact counts and times from the run's final accounting (they replace the folded
    broadcasts' once the run ended)."""

    sent: int
    completed: int
    failed: int
    cancelled: int
    started: datetime | None
    ended: datetime | None


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RunTracker:
    """The controller-owned status of one run (see the module doc), built by `status()`.

    Fed by `on_state` (the controller's state callback), `apply`/`follow` (event-bus
    broadcasts), `watch` (the controller, for the workers) and `finish` (the verdict). Calls
    `on_change` on every state change and every phase start or end. Never blocks."""

    TOPICS = tuple(kind.__struct_config__.tag.encode()  # type: ignore[union-attr]
                   for kind in (PhaseStarted, PhaseSendingComplete, PhaseComplete, Progress))
    """The event-bus topics `follow` needs."""

    def __init__(self, *, config: RunConfig, clock: Callable[[], datetime] = _utc_now,
                 on_change: Callable[[], None] = lambda: None,
                 server_metrics: Callable[[], dict[str, Any] | None] = lambda: None) -> None:
        self._config, self._clock, self.on_change = config, clock, on_change
        self._server_metrics = server_metrics
        self._phase_config = {Phase(str(p.role)): (i, p) for i, p in enumerate(config.benchmark.phases)}
        self.progress = RunProgress()  # the broadcasts, folded (times: seconds since the epoch)
        self._accounted: dict[Phase, _Accounted] = {}
        self._controller: SystemController | None = None
        self._configured = False
        self._frozen_workers: WorkersStatus | None = None
        self._failure: ControllerFailure | None = None
        self._exported: bool | None = None
        self.state = SystemState.INITIALIZING

    def watch(self, controller: SystemController) -> None:
        """Count workers from `controller`'s registry."""
        self._controller = controller

    async def on_state(self, state: SystemState) -> None:
        """The controller moved to `state`."""
        if state is SystemState.READY:
            self._configured = True
        if state in _STOPPED and self._frozen_workers is None:
            self._frozen_workers = self._workers()
        self.state = state
        self.on_change()

    async def follow(self, events: EventSource) -> None:
        """`apply` every event of `events` until it ends or the caller cancels."""
        while True:
            try:
                event = await events.recv()
            except BadMessage as exc:
                log.warning("job_status.bad_event", error=str(exc))
                continue
            except anyio.EndOfStream:
                return
            self.apply(event)

    def apply(self, event: Event) -> None:
        """Fold a phase or progress broadcast into `progress` (others, and phases the config
        lacks, are ignored); a phase's start or end is a change worth pushing at once."""
        if not isinstance(event, PhaseStarted | PhaseSendingComplete | PhaseComplete | Progress):
            return
        if event.phase not in self._phase_config:
            return
        self.progress = self.progress.apply(event, self._clock().timestamp())
        if isinstance(event, PhaseStarted | PhaseComplete):
            self.on_change()

    def finish(self, verdict: Verdict, outcome: ProfileOutcome | None) -> None:
        """The run ended with `verdict`: the accounting's exact counts (when the benchmark ran),
        the failure (when it failed) and whether the exports were written (`outcome` None: a
        bring-up run, nothing to export)."""
        accounting = outcome.accounting if outcome is not None else None
        for tag, acc in (accounting.phases if accounting is not None else {}).items():
            if tag not in self._phase_config:
                continue
            if self.progress.phase(tag) is None:  # a phase whose broadcasts were all missed
                self.progress = self.progress.apply(PhaseSendingComplete(phase=tag, issued=acc.issued, at_ns=0),
                                                    self._clock().timestamp())
            self._accounted[tag] = _Accounted(
                sent=acc.sent or acc.issued, completed=acc.ok + acc.failed + acc.cancelled, failed=acc.failed,
                cancelled=acc.cancelled, started=_wall(acc.start_wall_ns), ended=_wall(acc.end_wall_ns))
        if verdict.state is SystemState.FAILED:
            self._failure = ControllerFailure(message=verdict.reason or "the run failed",
                                              reason="UserError" if verdict.user_error else "RunFailed",
                                              time=timestamp(self._clock()))
        self._exported = outcome is not None and outcome.results is not None
        self.on_change()

    def status(self) -> AIPerfJobStatus:
        """The controller-owned status keys as of now."""
        now = self._clock()
        phases: dict[str, PhaseStatus] = {}
        top: tuple[PhaseStatus, float | None] | None = None
        for progress in self.progress.phases:
            index, spec = self._phase_config[progress.phase]
            entry = self._phase_status(progress, index, spec, now)
            phases[spec.name] = entry
            if spec.role == PhaseKind.PROFILING:
                top = entry, progress.fraction(now.timestamp()) if not entry.requests_total else None
        current = self.progress.current
        return AIPerfJobStatus(
            sub_phase=self.state, current_phase=self._phase_config[current.phase][1].name if current else None,
            phases=phases, workers=self._workers(),
            requests_completed=top[0].requests_completed if top else None,
            requests_total=top[0].requests_total if top else None,
            requests_per_second=top[0].requests_per_second if top else None,
            progress_percent=_percent(*top) if top else None,
            controller_failure=self._failure, results_exported=self._exported,
            server_metrics=self._server_metrics())

    def _phase_status(self, progress: PhaseProgress, index: int, spec: PhaseSpec, now: datetime) -> PhaseStatus:
        """One phase's status entry: the folded broadcasts, or its final accounting once known."""
        kind = spec.role
        final = self._accounted.get(progress.phase)
        started = (final.started if final else None) or _wall_s(progress.started)
        ended = (final.ended if final else None) or (_wall_s(progress.ended) if progress.ended is not None else None)
        completed = final.completed if final else progress.completed
        elapsed = ((ended or now) - started).total_seconds()
        total = progress.expected if progress.expected is not None else spec.requests
        return PhaseStatus(
            phase_name=spec.name, phase_kind=kind, phase_index=index,
            profiling_index=sum(p.role == kind for p in self._config.benchmark.phases[:index])
            if kind == PhaseKind.PROFILING else None,
            requests_sent=final.sent if final else progress.sent, requests_completed=completed,
            requests_failed=final.failed if final else progress.errors,
            requests_cancelled=final.cancelled if final else None, requests_total=total,
            requests_per_second=round(completed / elapsed, 3) if elapsed > 0 else 0.0,
            start_time=timestamp(started), end_time=timestamp(ended) if ended else None)

    def _workers(self) -> WorkersStatus:
        if self._frozen_workers is not None:
            return self._frozen_workers
        controller = self._controller
        planned = controller.planned if controller else plan_services(self._config.services)
        services = controller.services if controller else {}
        lost: Mapping[str, str] = controller.lost if controller else {}

        def up(sid: str) -> bool:
            info = services.get(sid)
            return info is not None and info.state is ServiceState.RUNNING and sid not in lost

        workers = [p.service_id for p in planned if p.service_type is ServiceType.WORKER]
        processors = [p.service_id for p in planned if p.service_type is ServiceType.RECORD_PROCESSOR]
        pods: dict[str, list[str]] = {}
        for p in planned:
            if p.group_id:
                pods.setdefault(p.group_id, []).append(p.service_id)
        ready = sum(map(up, workers))
        dispatchable = ready if self._configured else 0
        return WorkersStatus(
            ready=ready, total=len(workers), dispatchable=dispatchable, router_connected=dispatchable,
            ready_record_processors=sum(map(up, processors)), declared_record_processors=len(processors),
            ready_pods=sum(all(map(up, members)) for members in pods.values()), total_pods=len(pods),
            degraded_pods=sum(any(sid in lost for sid in members) for members in pods.values()))


def _percent(phase: PhaseStatus, by_time: float | None) -> float | None:
    """How far the profiling phase is: by request count, else `by_time` (its elapsed time over
    its duration), in percent."""
    if phase.requests_total:
        return round(min(100.0, 100.0 * (phase.requests_completed or 0) / phase.requests_total), 1)
    return round(100.0 * by_time, 1) if by_time is not None else None


def _wall(ns: int) -> datetime | None:
    """A wall-clock time in ns since the epoch (0: unknown) as an aware datetime."""
    return datetime.fromtimestamp(ns / 1e9, UTC) if ns else None


def _wall_s(seconds: float) -> datetime:
    """Seconds since the epoch as an aware datetime."""
    return datetime.fromtimestamp(seconds, UTC)


@asynccontextmanager
async def reporting(config: RunConfig, env: Mapping[str, str], *,
                    kube: InClusterConfig | None = None) -> AsyncIterator[RunTracker | None]:
    """Operator mode (the environment names the AIPerfJob, `JobRef.from_env`): yields a
    `RunTracker` for `run_system` while a `StatusReporter` pushes its status; on exit, after the
    caller's `finish`, one last push (bounded by its deadline). Otherwise yields None. `kube`
    replaces the in-cluster config (tests); a pod that cannot find its API server logs why at
    error and runs without reporting."""
    try:
        job = JobRef.from_env(env)
        if job is not None and kube is None:
            kube = InClusterConfig.from_env(env)
    except InClusterError as exc:
        log.error("job_status.disabled", reason=str(exc))
        job = None
    if job is None or kube is None:
        yield None
        return
    artifacts = Path(config.artifact_dir)
    tracker = RunTracker(config=config, server_metrics=(lambda: read_projection(artifacts))
                         if config.benchmark.server_metrics.enabled else (lambda: None))
    async with in_cluster(kube) as client, anyio.create_task_group() as tg:
        reporter = StatusReporter(client=client, job=job, snapshot=tracker.status)
        tracker.on_change = reporter.poke
        await tg.start(reporter.run)
        yield tracker
        await reporter.flush()
        tg.cancel_scope.cancel()
