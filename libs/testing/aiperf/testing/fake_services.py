"""Scripted fake services for a real system-controller: each registers over `control` with the
real `ControlClient` (register, heartbeat, status, one reply per command) and answers the
controller's commands the way that service would, without doing the work."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
import zmq.asyncio
from anyio.abc import TaskStatus

from aiperf.comms import Addressing, Channel, DealerSocket
from aiperf.config import RunConfig, group_id
from aiperf.messages import (
    BuildDataset,
    Command,
    CreditsLost,
    DatasetBuilt,
    Finalize,
    Finalized,
    GroupReady,
    Phase,
    PhaseAccounting,
    PrepareGroup,
    ProfileCancel,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    Reply,
    RunAccounting,
    ServiceState,
    ServiceType,
    ToService,
    WorkerLost,
)
from aiperf.runtime import UnknownCommand
from aiperf.runtime.control_client import ControlClient, Handler
from aiperf.runtime.lifecycle import Lifecycle

log = structlog.get_logger("aiperf.testing")

Answer = Handler
"""How a fake service answers one command: a service's command handler (`aiperf.runtime.
control_client.Handler`), raising `UnknownCommand` for a command the real service does not handle."""


class ScriptedService:
    """One fake service instance on the `control` channel.

    `run` connects (queued until the controller binds), registers as `service_id`, reports
    `running` and heartbeats; each command is logged and answered by `answer`. It returns once
    the controller sent `Shutdown` (reporting `stopped` first); `stopped` is then set."""

    def __init__(self, ctx: zmq.asyncio.Context, addressing: Addressing, *, service_id: str,
                 service_type: ServiceType, answer: Answer, group_id: str = "",
                 heartbeat_interval_s: float = 1.0) -> None:
        self.service_id, self.service_type, self.group_id = service_id, service_type, group_id
        self._ctx, self._addressing, self._answer = ctx, addressing, answer
        self._interval = heartbeat_interval_s
        self.commands: list[str] = []
        self.stopped = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve one controller run (until `Shutdown`); ready once registration is queued."""
        lifecycle = Lifecycle()
        async with AsyncExitStack() as stack:
            dealer = await stack.enter_async_context(DealerSocket[ToService](
                self._ctx, identity=self.service_id, decode=ToService, channel="control",
                connect=[self._addressing.connect_endpoint(Channel.CONTROL)], linger_ms=1_000))
            control = ControlClient(dealer, service_id=self.service_id, service_type=self.service_type,
                                    group_id=self.group_id, lifecycle=lifecycle,
                                    heartbeat_interval_s=self._interval)
            await control.register()
            lifecycle.move(ServiceState.RUNNING)
            await control.send_status()
            async with anyio.create_task_group() as tg:

                def stop(reason: str) -> None:
                    log.info("fake_service.shutdown", service=self.service_id, reason=reason)
                    self.commands.append("Shutdown")
                    tg.cancel_scope.cancel()

                tg.start_soon(control.heartbeat_loop)
                tg.start_soon(lambda: control.serve_commands(self._handle, on_shutdown=stop))
                task_status.started()
            lifecycle.move(ServiceState.STOPPING)
            lifecycle.move(ServiceState.STOPPED)
            await control.send_status()
        self.stopped.set()

    async def _handle(self, command: Command[Any]) -> Reply | None:
        name = type(command).__name__
        self.commands.append(name)
        log.info("fake_service.command", service=self.service_id, command=name)
        try:
            reply = await self._answer(command)
        except Exception as exc:
            log.info("fake_service.refused", service=self.service_id, command=name, error=str(exc))
            raise
        fields = {k: v for k, v in msgspec.to_builtins(reply).items()
                  if k not in ("kind", "request_id", "service_id")} if reply is not None else {}
        log.info("fake_service.reply", service=self.service_id, command=name,
                 reply=type(reply).__name__ if reply is not None else "Ack", fields=fields)
        return reply


def _configure_only(service_type: ServiceType) -> Answer:
    """A service whose only run command is `ProfileConfigure` (answered at once)."""

    async def answer(command: Command[Any]) -> Reply | None:
        if isinstance(command, ProfileConfigure):
            return None
        raise UnknownCommand(f"the {service_type} does not handle {type(command).__name__}")

    return answer


class FakeRunTimingManager:
    """The timing-manager's side of a run: `ProfileStart` "runs" each configured phase, one
    request every `request_s` (`phase.requests` of them, or `default_requests`), and answers
    with balanced accounting; `ProfileCancel` ends it early (`cancelled`); `WorkerLost` loses
    nothing."""

    def __init__(self, config: RunConfig, *, request_s: float = 0.05, default_requests: int = 10) -> None:
        self._phases = config.benchmark.phases
        self._request_s, self._default = request_s, default_requests
        self._cancel = anyio.Event()

    async def answer(self, command: Command[Any]) -> Reply | None:
        match command:
            case ProfileConfigure():
                self._cancel = anyio.Event()
                return None
            case ProfileStart():
                return ProfileFinished(accounting=await self._run())
            case ProfileCancel():
                self._cancel.set()
                return None
            case WorkerLost():
                return CreditsLost(lost=0)
        raise UnknownCommand(f"the timing-manager does not handle {type(command).__name__}")

    async def _run(self) -> RunAccounting:
        phases: dict[Phase, PhaseAccounting] = {}
        for phase in self._phases:
            if self._cancel.is_set():
                break
            start_ns, start_wall_ns, done = time.perf_counter_ns(), time.time_ns(), 0
            for _ in range(phase.requests or self._default):  # one "request" per interval
                with anyio.move_on_after(self._request_s):
                    await self._cancel.wait()
                if self._cancel.is_set():
                    break
                done += 1
            phases[Phase(phase.role)] = PhaseAccounting(
                issued=done, returned=done, sent=done, ok=done, start_ns=start_ns,
                end_ns=time.perf_counter_ns(), start_wall_ns=start_wall_ns, end_wall_ns=time.time_ns())
        return RunAccounting(phases=phases, cancelled=self._cancel.is_set(),
                             stopped_reason="cancelled" if self._cancel.is_set() else "")


class FakeRunRecordsManager:
    """The records-manager's side of a run: `ProfileConfigure` creates the artifact folder,
    `Finalize` answers with a short table and the accounting it was given (no export files)."""

    def __init__(self, config: RunConfig) -> None:
        self._dir = Path(config.artifact_dir)

    async def answer(self, command: Command[Any]) -> Reply | None:
        match command:
            case ProfileConfigure():
                self._dir.mkdir(parents=True, exist_ok=True)
                return None
            case Finalize(accounting=accounting):
                prof = accounting.phases.get(Phase.PROFILING, PhaseAccounting())
                line = "; ".join(f"{p}: issued {a.issued}, ok {a.ok}, failed {a.failed}, "
                                 f"cancelled {a.cancelled}, lost {a.lost}"
                                 for p, a in accounting.phases.items())
                return Finalized(table=f"(fake records-manager) {prof.ok} requests, no metrics",
                                 accounting_line=line, balanced=True, request_count=prof.ok,
                                 error_request_count=prof.failed, artifact_dir=str(self._dir))
        raise UnknownCommand(f"the records-manager does not handle {type(command).__name__}")


def controller_peers(ctx: zmq.asyncio.Context, addressing: Addressing, config: RunConfig, *,
                     dataset_dir: str, conversations: int, request_s: float = 0.05) -> list[ScriptedService]:
    """Every service instance `config` plans except the controller, each a `ScriptedService` with
    the id the controller's plan gives it: the dataset-manager answers `BuildDataset` with
    `dataset_dir`/`conversations`, each worker-group-manager `PrepareGroup` with its members,
    the timing-manager and records-manager as `FakeRunTimingManager`/`FakeRunRecordsManager`,
    and the rest `ProfileConfigure`."""
    counts = config.services
    beat = config.runtime.heartbeat_interval_s

    def one(service_type: ServiceType, answer: Answer, *, sid: str = "", group: str = "") -> ScriptedService:
        return ScriptedService(ctx, addressing, service_id=sid or str(service_type), service_type=service_type,
                               answer=answer, group_id=group, heartbeat_interval_s=beat)

    async def build_dataset(command: Command[Any]) -> Reply | None:
        if isinstance(command, BuildDataset):
            return DatasetBuilt(dataset_dir=dataset_dir, conversations=conversations)
        raise UnknownCommand(f"the dataset-manager does not handle {type(command).__name__}")

    def prepare_group(group: str, members: list[str]) -> Answer:
        async def answer(command: Command[Any]) -> Reply | None:
            if isinstance(command, PrepareGroup):
                return GroupReady(dataset_dir=command.dataset_dir, group_id=group, members=members,
                                  conversations=conversations)
            raise UnknownCommand(f"the worker-group-manager does not handle {type(command).__name__}")
        return answer

    peers = [
        one(ServiceType.EVENT_BUS_PROXY, _configure_only(ServiceType.EVENT_BUS_PROXY)),
        one(ServiceType.RECORDS_MANAGER, FakeRunRecordsManager(config).answer),
        one(ServiceType.TIMING_MANAGER, FakeRunTimingManager(config, request_s=request_s).answer),
        one(ServiceType.DATASET_MANAGER, build_dataset),
        one(ServiceType.API, _configure_only(ServiceType.API)),
    ]
    for g in range(counts.worker_groups):
        gid = group_id(g)
        workers = [f"worker-{gid}-{i}" for i in range(counts.workers_in(g))]
        processors = [f"record-processor-{gid}-{j}" for j in range(counts.record_processors_per_group)]
        peers.append(one(ServiceType.WORKER_GROUP_MANAGER, prepare_group(gid, workers + processors),
                         sid=f"worker-group-manager-{gid}", group=gid))
        peers += [one(ServiceType.RECORD_PROCESSOR, _configure_only(ServiceType.RECORD_PROCESSOR), sid=sid,
                      group=gid) for sid in processors]
        peers += [one(ServiceType.WORKER, _configure_only(ServiceType.WORKER), sid=sid, group=gid)
                  for sid in workers]
    return peers
