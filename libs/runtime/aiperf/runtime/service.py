"""`run_service`: the one way a service process runs.

It configures logging, creates the ZMQ context, opens the control channel, lets `main.py`
wire the service object, runs it inside a task group with heartbeats, command handling and (with
`AIPERF_HEALTH_PORT`, in Kubernetes) the health endpoints,
treats SIGTERM/SIGINT and the controller's `Shutdown` as a graceful stop, and maps the
outcome to the exit code: 0 clean stop, 1 failure, 2 user error.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anyio
import structlog
from anyio.abc import TaskStatus
from zmq.asyncio import Context as ZmqContext

from aiperf.comms import Addressing, Channel, DealerSocket, load_curve, zmq_context
from aiperf.config import RunConfig
from aiperf.messages import Command, Reply, ServiceState, ServiceType, ToService
from aiperf.runtime.control_client import ControlClient
from aiperf.runtime.errors import EXIT_FAILED, EXIT_OK, EXIT_USER_ERROR, UserError, root_cause
from aiperf.runtime.health import HEALTH_PORT_ENV, Health, HealthServer
from aiperf.runtime.lifecycle import Lifecycle
from aiperf.runtime.logs import configure_logging

log = structlog.get_logger("aiperf.runtime")


class Service(Protocol):
    """What every service object offers: `run` reports readiness via `task_status.started()`
    and runs until cancelled (returning early means the service is done)."""

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None: ...


@runtime_checkable
class CommandHandler(Protocol):
    """Optional: services that accept commands beyond `Shutdown` implement `handle`: it returns
    the reply (an instance of `command.reply`; None for `Ack`) or raises (`UnknownCommand` for a
    command it does not handle); the exception travels back as `CommandFailed`."""

    async def handle(self, command: Command[Any]) -> Reply | None: ...


@dataclass(frozen=True, kw_only=True)
class ServiceContext:
    """What `main.py`'s wiring function gets: identity, config, ZMQ context, addressing."""

    config: RunConfig
    service_type: ServiceType
    service_id: str
    group_id: str
    zmq: ZmqContext
    addressing: Addressing
    extra: dict[str, Any] = field(default_factory=dict)


Build = Callable[[ServiceContext, AsyncExitStack], Awaitable[Service]]


def addressing_of(config: RunConfig) -> Addressing:
    """The run's addressing, with the connect side chosen by `AIPERF_CONTROLLER_HOST`.

    Kubernetes runs use the fixed channel ports (other pods must find them); local runs bind
    TCP on ephemeral ports unless `comms.ports` names one, so concurrent runs never collide
    (local connectors use IPC)."""
    ports = dict(config.comms.ports)
    if not config.kubernetes:
        ports = {channel.label: 0 for channel in Channel} | ports
    return Addressing.from_env(ipc_dir=config.comms.ipc_dir,
                               tcp_bind_host=config.comms.tcp_bind_host, ports=ports)


def run_service(*, config: RunConfig, service_type: ServiceType, service_id: str, build: Build,
                group_id: str = "") -> int:
    """Run one service process to completion and return its exit code."""
    configure_logging(service_id=service_id, level=config.runtime.log_level)
    runner = _Runner(config=config, service_type=service_type, service_id=service_id,
                     group_id=group_id, build=build)
    try:
        return anyio.run(runner.serve, backend_options={"use_uvloop": True})
    except KeyboardInterrupt:  # a second Ctrl+C while stopping
        return EXIT_FAILED


class _Runner:
    def __init__(self, *, config: RunConfig, service_type: ServiceType, service_id: str,
                 group_id: str, build: Build) -> None:
        self.config, self.service_type, self.service_id = config, service_type, service_id
        self.group_id, self.build = group_id, build
        self.lifecycle = Lifecycle()

    async def serve(self) -> int:
        addressing = addressing_of(self.config)
        try:
            curve = load_curve(self.config.comms.curve_keys_dir)
        except (OSError, ValueError) as exc:  # the key Secret was not filled or not mounted
            log.error("service.curve_keys_unreadable", error=str(exc))
            return EXIT_USER_ERROR
        with zmq_context(curve, linger_ms=2_000) as ctx:
            async with AsyncExitStack() as stack:
                dealer = await stack.enter_async_context(DealerSocket[ToService](
                    ctx, identity=self.service_id, decode=ToService, channel="control",
                    connect=[addressing.connect_endpoint(Channel.CONTROL)], linger_ms=2_000))
                control = ControlClient(dealer, service_id=self.service_id,
                                        service_type=self.service_type, group_id=self.group_id,
                                        lifecycle=self.lifecycle,
                                        heartbeat_interval_s=self.config.runtime.heartbeat_interval_s)
                await control.register()
                code = await self._supervise(control, ServiceContext(
                    config=self.config, service_type=self.service_type, service_id=self.service_id,
                    group_id=self.group_id, zmq=ctx, addressing=addressing), stack)
                with anyio.CancelScope(shield=True):
                    await control.send_status()
                return code

    async def _supervise(self, control: ControlClient, context: ServiceContext,
                         stack: AsyncExitStack) -> int:
        try:
            async with AsyncExitStack() as service_stack:
                service = await self.build(context, service_stack)
                handler = service.handle if isinstance(service, CommandHandler) else None
                async with anyio.create_task_group() as tg:

                    def stop(reason: str) -> None:
                        if not self.lifecycle.final and self.lifecycle.state is not ServiceState.STOPPING:
                            self.lifecycle.move(ServiceState.STOPPING)
                        log.info("service.stopping", reason=reason)
                        tg.cancel_scope.cancel()

                    tg.start_soon(self._watch_signals, stop)
                    tg.start_soon(control.heartbeat_loop)
                    if port := os.environ.get(HEALTH_PORT_ENV):
                        await tg.start(HealthServer(self._health, port=int(port)).run)
                    tg.start_soon(functools.partial(control.serve_commands, handler, on_shutdown=stop))
                    await tg.start(self._run_then_stop, service, stop)
                    if self.lifecycle.state is ServiceState.STARTING:
                        self.lifecycle.move(ServiceState.RUNNING)
                        log.info("service.running", type=str(self.service_type))
                        await control.send_status()
        except Exception as group:
            exc = root_cause(group)
            if isinstance(exc, UserError):
                log.error("service.user_error", error=str(exc))
                self._fail(str(exc))
                return EXIT_USER_ERROR
            log.error("service.failed", error=f"{type(exc).__name__}: {exc}", exc_info=group)
            self._fail(f"{type(exc).__name__}: {exc}")
            return EXIT_FAILED
        if self.lifecycle.state is ServiceState.STARTING:
            self.lifecycle.move(ServiceState.STOPPING)
        self.lifecycle.move(ServiceState.STOPPED)
        log.info("service.stopped")
        return EXIT_OK

    def _health(self) -> Health:
        state = self.lifecycle.state
        return Health(alive=state is not ServiceState.FAILED, ready=state is ServiceState.RUNNING)

    def _fail(self, error: str) -> None:
        if not self.lifecycle.final:
            self.lifecycle.move(ServiceState.FAILED, error=error)

    @staticmethod
    async def _run_then_stop(service: Service, stop: Callable[[str], None], *,
                             task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await service.run(task_status=task_status)
        stop("service finished")

    @staticmethod
    async def _watch_signals(stop: Callable[[str], None]) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                stop(signal.Signals(signum).name)
                return
