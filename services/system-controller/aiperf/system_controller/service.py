"""The system-controller: starts the services, waits for them, drives the run, stops them,
and returns the run's verdict."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import anyio
import structlog

from aiperf.config import RunConfig
from aiperf.messages import ServiceState, ServiceType, Shutdown, SystemState
from aiperf.runtime import CommandError
from aiperf.runtime.control_server import ControlServer, RegistrationTimeout
from aiperf.system_controller.launcher import Handle, Launcher, Planned
from aiperf.system_controller.plan import plan_services

log = structlog.get_logger("aiperf.system_controller")


@dataclass(kw_only=True)
class Verdict:
    """How the run ended. `exit_code`: 0 done, 1 failed or degraded (a worker was lost but
    the run finished), 2 user error, 130 cancelled."""

    state: SystemState
    reason: str = ""
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    registered: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    user_error: bool = False

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


class SystemController:
    """Owns the run from the first process start to the last process exit.

    The control ROUTER (inside `control`) is bound by the caller before `run` and closed after
    it returns, so it outlives every service."""

    def __init__(self, *, config: RunConfig, control: ControlServer, launcher: Launcher,
                 driver: Driver, on_state: Callable[[SystemState], Awaitable[None]] | None = None,
                 describe_failure: Callable[[str], str] | None = None) -> None:
        self._config, self._control, self._launcher = config, control, launcher
        self._driver, self._on_state = driver, on_state
        self._describe = describe_failure or (lambda sid: "")
        self._plan = plan_services(config.services)
        self._handles: dict[str, Handle] = {}
        self._stopping = False
        self._lost: dict[str, str] = {}
        self._user_error = False
        self._failure = ""
        self._failed = anyio.Event()
        self.cancelled = anyio.Event()
        self.state = SystemState.INITIALIZING

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
        """Run to the end; never raises for service failures (they become the verdict)."""
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
                       user_error=self._user_error)

    async def _until_failure(self, body: Callable[[], Awaitable[SystemState]]) -> SystemState:
        result = SystemState.FAILED
        async with anyio.create_task_group() as tg:

            async def main() -> None:
                nonlocal result
                try:
                    result = await body()
                except (RunFailed, RegistrationTimeout) as exc:
                    self._fail(str(exc))
                except CommandError as exc:
                    self._user_error = exc.is_user_error
                    self._fail(exc.error if exc.is_user_error else str(exc))
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
                    return
            except Exception as exc:
                why = f"{why} (and its credits could not be written off: {exc})"
        self._fail(f"service {sid} {why}")

    async def _watch_liveness(self) -> None:
        runtime = self._config.runtime
        while True:
            await anyio.sleep(runtime.heartbeat_interval_s)
            if self._stopping:
                return
            for info in self._control.failed():
                if info.service_id not in self._lost:
                    self._fail(f"service {info.service_id} failed: {info.error}")
            for info in self._control.silent(timeout=runtime.heartbeat_timeout_s):
                await self._service_lost(info.service_id, f"missed heartbeats for "
                                         f"{runtime.heartbeat_timeout_s:g}s")

    async def _bring_up_and_drive(self) -> SystemState:
        runtime = self._config.runtime
        expected = self._config.services.expected()
        await self._control.wait_registered(expected, timeout=runtime.registration_timeout_s)
        await self._wait_running(timeout=runtime.registration_timeout_s)
        log.info("system.all_registered", services=len(self._control.services))
        await self._set_state(SystemState.CONFIGURING)
        return await self._driver.drive(self._control, self._set_state, self.cancelled)

    async def _wait_running(self, *, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            while any(s.state is ServiceState.STARTING for s in self._control.services.values()):
                await self._control.wait_changed()
            return
        slow = sorted(s.service_id for s in self._control.services.values()
                      if s.state is ServiceState.STARTING)
        raise RunFailed(f"services never became ready: {', '.join(slow)}")

    async def _stop_all(self) -> None:
        """Shutdown over control, wait for every exit; SIGTERM then SIGKILL the stragglers."""
        self._stopping = True
        timeout = self._config.runtime.shutdown_timeout_s
        live = [sid for sid, info in self._control.services.items()
                if info.state not in (ServiceState.STOPPED, ServiceState.FAILED)
                and sid not in self._lost]
        replies = await self._control.ask_all(
            live, lambda rid: Shutdown(request_id=rid, reason=str(self.state)), timeout=timeout)
        for sid, reply in replies.items():
            if isinstance(reply, Exception):
                log.warning("system.shutdown_unanswered", service=sid, error=str(reply))
        await self._wait_exits(timeout)

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


__all__ = ["BringUpDriver", "Driver", "Planned", "RunFailed", "SystemController", "Verdict"]
