"""The system-controller: starts the services, waits for them, drives the run, stops them,
and returns the run's verdict."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import anyio
import structlog

from aiperf.comms import AskTimeout, PeerUnreachable
from aiperf.config import RunConfig
from aiperf.messages import ServiceState, ServiceType, Shutdown, SystemState
from aiperf.runtime import CommandError, UserError
from aiperf.runtime.control_server import ControlServer, RegistrationTimeout, ServiceInfo
from aiperf.system_controller.launcher import Handle, Launcher, Planned
from aiperf.system_controller.plan import plan_services

log = structlog.get_logger("aiperf.system_controller")


@dataclass(kw_only=True)
class Verdict:
    """How the run ended. `exit_code`: 0 done, 1 failed or degraded (a worker was lost but
    the run finished), 2 user error, 130 cancelled. `lost_pods` (Kubernetes): the worker
    groups whose services all stopped heartbeating."""

    state: SystemState
    reason: str = ""
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    registered: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    user_error: bool = False
    lost_pods: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.user_error:
            return 2
        if self.state is SystemState.DONE and self.degraded:
            return 1
        return {SystemState.DONE: 0, SystemState.CANCELLED: 130}.get(self.state, 1)


class Driver(Protocol):
    """Drives the run once every service is up (bring-up only, or a benchmark).

    Returns the final state (`done` or `cancelled`); raising fails the run."""

    async def drive(self, control: ControlServer, set_state: Callable[[SystemState], Awaitable[None]],
                    cancelled: anyio.Event) -> SystemState: ...


@runtime_checkable
class AbsorbsWorkerLoss(Protocol):
    """A driver that can go on without a dead worker (its credits are declared lost)."""

    async def worker_lost(self, service_id: str, why: str) -> bool: ...


class BringUpDriver:
    """Nothing to drive: the run is done as soon as every service is running."""

    async def drive(self, control: ControlServer, set_state: Callable[[SystemState], Awaitable[None]],
                    cancelled: anyio.Event) -> SystemState:
        return SystemState.CANCELLED if cancelled.is_set() else SystemState.DONE


class RunFailed(Exception):
    """The run cannot go on; the message names the service and the reason."""


GROUPED = frozenset({ServiceType.WORKER_GROUP_MANAGER, ServiceType.WORKER, ServiceType.RECORD_PROCESSOR})
"""Service types that live in a worker group (one worker pod in Kubernetes)."""


class SystemController:
    """Owns the run from the first process start to the last process exit.

    The control ROUTER (inside `control`) is bound by the caller before `run` and closed after
    it returns, so it outlives every service.

    Liveness: a service that reports `failed` fails the run. Locally a service this controller
    started is judged by its process (its exit), never by late heartbeats (a busy machine delays
    them); a service without a process here (Kubernetes, external services) that stops
    heartbeating for `heartbeat_timeout_s` is lost. A lost worker is written off by the driver while profiling
    (the run goes on, degraded); any other lost service fails the run. Kubernetes mode (no
    processes to watch, heartbeats are the only signal) treats a worker pod as a unit: when
    every registered service of a group is silent, the pod is lost, its workers are written
    off and its worker-group-manager and record-processors do not fail the run by themselves.
    A group member silent alone is judged alone only once it has been silent
    `2 * heartbeat_interval_s` longer (the rest of a dying pod goes silent within one
    interval). Losing more than `runtime.max_lost_worker_fraction` of the workers, or all of
    them, fails the run naming the lost pods.

    `before_drive`, when given, is awaited once every service is running and before the run is
    configured (the local server-metrics baseline scrape, which overlaps the services' start-up
    and must precede the first request)."""

    def __init__(self, *, config: RunConfig, control: ControlServer, launcher: Launcher,
                 driver: Driver, on_state: Callable[[SystemState], Awaitable[None]] | None = None,
                 describe_failure: Callable[[str], str] | None = None,
                 before_drive: Callable[[], Awaitable[object]] | None = None) -> None:
        self._config, self._control, self._launcher = config, control, launcher
        self._before_drive = before_drive
        self._driver, self._on_state = driver, on_state
        self._describe = describe_failure or (lambda sid: "")
        self._plan = plan_services(config.services)
        self._handles: dict[str, Handle] = {}
        self._stopping = False
        self._lost: dict[str, str] = {}
        self._lost_groups: dict[str, str] = {}
        self._user_error = False
        self._failure = ""
        self._failed = anyio.Event()
        self.cancelled = anyio.Event()
        self.state = SystemState.INITIALIZING

    @property
    def planned(self) -> Sequence[Planned]:
        """Every service instance the run needs (the controller excepted)."""
        return self._plan

    @property
    def services(self) -> Mapping[str, ServiceInfo]:
        """The services registered so far, by id, as the control channel last heard them."""
        return self._control.services

    @property
    def lost(self) -> Mapping[str, str]:
        """Registered services written off (worker lost, or with its pod), by id: why."""
        return self._lost

    async def _set_state(self, state: SystemState) -> None:
        self.state = state
        log.info("system.state", state=str(state))
        if self._on_state is not None:
            await self._on_state(state)

    def cancel(self) -> None:
        """Ask for a graceful early stop (Ctrl+C): the driver finishes, services stop."""
        self.cancelled.set()

    def _fail(self, reason: str) -> None:
        if not self._failure:
            self._failure = reason
            log.error("system.failing", reason=reason)
        self._failed.set()

    async def run(self) -> Verdict:
        """Run to the end; never raises for service failures (they become the verdict): a
        refused command, an unanswered one or a service gone from the control channel fail the
        run naming the service."""
        final = SystemState.FAILED
        async with anyio.create_task_group() as tg:
            await tg.start(self._control.run)
            try:
                await self._start_all(tg)
                tg.start_soon(self._watch_liveness)
                final = await self._until_failure(self._bring_up_and_drive)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._set_state(SystemState.STOPPING)
                    await self._stop_all()
            tg.cancel_scope.cancel()
        if self._failure:
            final = SystemState.FAILED
        await self._set_state(final)
        return Verdict(state=final, reason=self._failure,
                       exit_codes={sid: h.returncode for sid, h in self._handles.items()},
                       registered=sorted(self._control.services),
                       degraded=[f"{sid} {why}" for sid, why in self._lost.items()],
                       user_error=self._user_error, lost_pods=_by_group(self._lost_groups))

    async def _until_failure(self, body: Callable[[], Awaitable[SystemState]]) -> SystemState:
        result = SystemState.FAILED
        async with anyio.create_task_group() as tg:

            async def main() -> None:
                nonlocal result
                try:
                    result = await body()
                except (RunFailed, RegistrationTimeout) as exc:
                    self._fail(str(exc))
                except UserError as exc:
                    self._user_error = True
                    self._fail(str(exc))
                except CommandError as exc:
                    self._user_error = exc.is_user_error
                    self._fail(exc.error if exc.is_user_error else str(exc))
                except AskTimeout as exc:
                    self._fail(f"service {exc.target} did not answer {exc.request_id} within {exc.timeout:g}s")
                except PeerUnreachable as exc:
                    self._fail(f"service {exc.peer.decode(errors='replace')} is gone (unreachable on control)")
                tg.cancel_scope.cancel()

            async def guard() -> None:
                await self._failed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(main)
            tg.start_soon(guard)
        return result

    async def _start_all(self, tg: anyio.abc.TaskGroup) -> None:
        for planned in self._plan:
            handle = await self._launcher.start(planned)
            if handle is not None:
                self._handles[planned.service_id] = handle
                tg.start_soon(self._watch_process, handle)

    async def _watch_process(self, handle: Handle) -> None:
        code = await handle.wait()
        if self._stopping:
            return
        sid = handle.planned.service_id
        if sid not in self._control.services:
            detail = self._describe(sid)
            self._fail(f"service {sid} exited with code {code} before registering"
                       + (f": {detail}" if detail else ""))
            return
        await self._service_lost(sid, f"exited with code {code} during the run")

    async def _service_lost(self, sid: str, why: str) -> None:
        """A registered service is gone: a worker may be absorbed by the driver, anything
        else fails the run."""
        if sid in self._lost:
            return
        info = self._control.services.get(sid)
        if (info is not None and info.service_type is ServiceType.WORKER
                and isinstance(self._driver, AbsorbsWorkerLoss)):
            self._lost[sid] = why
            try:
                if await self._driver.worker_lost(sid, why):
                    self._check_worker_budget()
                    return
            except Exception as exc:
                why = f"{why} (and its credits could not be written off: {exc})"
        self._fail(f"service {sid} {why}")

    async def _watch_liveness(self) -> None:
        while True:
            await anyio.sleep(self._config.runtime.heartbeat_interval_s)
            if self._stopping:
                return
            await self._check_liveness()

    async def _check_liveness(self) -> None:
        """One liveness sweep (see the class doc); fails the run or writes services off."""
        runtime = self._config.runtime
        for info in self._control.failed():
            if info.service_id not in self._lost:
                self._fail(f"service {info.service_id} failed: {info.error}")
        why = f"missed heartbeats for {runtime.heartbeat_timeout_s:g}s"
        silent = self._control.silent(timeout=runtime.heartbeat_timeout_s)
        if not self._config.kubernetes:
            for info in silent:
                if info.service_id not in self._handles:  # a process of ours is judged by its exit
                    await self._service_lost(info.service_id, why)
            return
        silent_ids = {info.service_id for info in silent}
        settled = {info.service_id for info in self._control.silent(
            timeout=runtime.heartbeat_timeout_s + 2 * runtime.heartbeat_interval_s)}
        for group, members in self._groups().items():
            if (group not in self._lost_groups and not silent_ids.isdisjoint(members)
                    and all(sid in silent_ids or sid in self._lost for sid in members)):
                await self._group_lost(group, members, why)
        for info in silent:
            if info.group_id in self._lost_groups and info.service_type in GROUPED:
                continue
            if info.service_type in GROUPED and info.service_id not in settled:
                continue  # maybe the first of a dying pod: judge it with its pod next sweep
            await self._service_lost(info.service_id, why)

    def _groups(self) -> dict[str, list[str]]:
        """Registered services per worker group (Kubernetes: per worker pod)."""
        groups: dict[str, list[str]] = {}
        for sid, info in sorted(self._control.services.items()):
            if info.service_type in GROUPED and info.group_id:
                groups.setdefault(info.group_id, []).append(sid)
        return groups

    async def _group_lost(self, group: str, members: list[str], why: str) -> None:
        """Every service of worker pod `group` is silent: write its workers off (or fail the
        run when the driver cannot), mark the rest lost without failing, check the budget."""
        self._lost_groups[group] = why
        log.error("system.pod_lost", group=group, services=members, why=why)
        pod_why = f"lost with worker pod {group} ({why})"
        workers = [sid for sid in members if self._control.services[sid].service_type is ServiceType.WORKER]
        for sid in members:
            if sid not in workers:
                self._lost.setdefault(sid, pod_why)
        for sid in workers:
            await self._service_lost(sid, pod_why)
            if self._failed.is_set():
                return
        self._check_worker_budget()

    def _check_worker_budget(self) -> None:
        """Kubernetes: fail the run once more than `max_lost_worker_fraction` of the workers
        (or all of them) are lost, naming the lost pods and lone lost workers."""
        if not self._config.kubernetes:
            return
        total = self._config.services.total_workers
        limit = self._config.runtime.max_lost_worker_fraction
        lost = sorted(sid for sid in self._lost if (info := self._control.services.get(sid)) is not None
                      and info.service_type is ServiceType.WORKER)
        if len(lost) < total and len(lost) <= limit * total:
            return
        pods = _by_group(self._lost_groups)
        lone = [sid for sid in lost if self._control.services[sid].group_id not in self._lost_groups]
        where = []
        if pods:
            where.append(f"worker pods {', '.join(pods)} stopped heartbeating")
        if lone:
            where.append(f"workers {', '.join(lone)} lost")
        self._fail(f"lost {len(lost)} of {total} workers, more than runtime.max_lost_worker_fraction="
                   f"{limit:g} allows: {'; '.join(where)}")

    async def _bring_up_and_drive(self) -> SystemState:
        runtime = self._config.runtime
        if self._config.kubernetes:
            await self._wait_planned(timeout=runtime.registration_timeout_s)
        else:
            await self._control.wait_registered(self._config.services.expected(),
                                                timeout=runtime.registration_timeout_s)
        await self._wait_running(timeout=runtime.registration_timeout_s)
        log.info("system.all_registered", services=len(self._control.services))
        if self._before_drive is not None:
            await self._before_drive()
        await self._set_state(SystemState.CONFIGURING)
        return await self._driver.drive(self._control, self._set_state, self.cancelled)

    async def _wait_planned(self, *, timeout: float) -> None:
        """Kubernetes: block until every planned instance (per pod, `workers_in` per group)
        registered under its planned id; raises `RunFailed` naming what is missing, per pod."""
        with anyio.move_on_after(timeout):
            while any(p.service_id not in self._control.services for p in self._plan):
                await self._control.wait_changed()
            return
        missing = [p for p in self._plan if p.service_id not in self._control.services]
        parts = []
        if controller := [p.service_id for p in missing if not p.group_id]:
            parts.append(f"controller pod: {', '.join(controller)}")
        for group in _by_group({p.group_id: "" for p in missing if p.group_id}):
            planned = [p.service_id for p in self._plan if p.group_id == group]
            absent = [p.service_id for p in missing if p.group_id == group]
            parts.append(f"worker pod {group}: " + ("none of its services (is the pod scheduled?)"
                                                    if len(absent) == len(planned) else ", ".join(absent)))
        raise RunFailed(f"services never registered within {timeout:g}s: {'; '.join(parts)}")

    async def _wait_running(self, *, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            while any(s.state is ServiceState.STARTING for s in self._control.services.values()):
                await self._control.wait_changed()
            return
        slow = sorted(s.service_id for s in self._control.services.values()
                      if s.state is ServiceState.STARTING)
        raise RunFailed(f"services never became ready: {', '.join(slow)}")

    async def _stop_all(self) -> None:
        """Shutdown over control, wait for every exit; SIGTERM then SIGKILL the stragglers.

        Two waves: the workers first (their processes here waited for, up to the timeout, but
        not forced), then everyone else. A stopping worker still says `WorkerLeaving` to the
        timing-manager; stopped together, that send found no peer and waited out the worker's
        flush timeout (~1 s of every run's teardown)."""
        self._stopping = True
        timeout = self._config.runtime.shutdown_timeout_s
        for sid, handle in self._handles.items():  # never registered: cannot hear Shutdown
            if sid not in self._control.services:
                handle.terminate()
        live = [sid for sid, info in self._control.services.items()
                if info.state not in (ServiceState.STOPPED, ServiceState.FAILED)
                and sid not in self._lost]
        workers = [sid for sid in live if self._control.services[sid].service_type is ServiceType.WORKER]
        await self._shutdown(workers, timeout)
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as tg:
                for sid in workers:
                    if (worker := self._handles.get(sid)) is not None:
                        tg.start_soon(worker.wait)
        await self._shutdown([sid for sid in live if sid not in workers], timeout)
        await self._wait_exits(timeout)

    async def _shutdown(self, service_ids: list[str], timeout: float) -> None:
        if not service_ids:
            return
        replies = await self._control.ask_all(
            service_ids, lambda sid, rid: Shutdown(request_id=rid, reason=str(self.state)), timeout=timeout)
        for sid, reply in replies.items():
            if isinstance(reply, Exception):
                log.warning("system.shutdown_unanswered", service=sid, error=str(reply))

    async def _wait_exits(self, timeout: float) -> None:
        handles = list(self._handles.values())
        steps: list[tuple[str, Callable[[Handle], None] | None]] = [
            ("wait", None), ("terminate", lambda h: h.terminate()), ("kill", lambda h: h.kill())]
        for step, action in steps:
            pending = [h for h in handles if h.returncode is None]
            if not pending:
                return
            if action is not None:
                for h in pending:
                    log.warning("system.forcing_stop", service=h.planned.service_id, step=step)
                    action(h)
            with anyio.move_on_after(timeout):
                async with anyio.create_task_group() as tg:
                    for h in pending:
                        tg.start_soon(h.wait)


def _by_group(groups: dict[str, str]) -> list[str]:
    """Group ids in numeric order (`g2` before `g10`)."""
    return sorted(groups, key=lambda g: (len(g), g))


__all__ = ["BringUpDriver", "Driver", "Planned", "RunFailed", "SystemController", "Verdict"]
