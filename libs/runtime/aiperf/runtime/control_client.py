"""Service side of the `control` channel: register, heartbeat, obey commands, reply."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from aiperf.comms import DealerSocket
from aiperf.messages import (
    Command,
    CommandReply,
    Heartbeat,
    ProfileConfigure,
    Register,
    ServiceStatus,
    ServiceType,
    Shutdown,
    ToService,
)
from aiperf.runtime.lifecycle import Lifecycle

log = structlog.get_logger("aiperf.runtime.control")

Handler = Callable[[Command], Awaitable[dict[str, Any]]]


class ControlClient:
    """Talks to the system-controller over one DEALER (identity = service id).

    `serve_commands` handles each command in its own task (a slow `ProfileConfigure` does
    not delay a `Shutdown`); a handler's exception travels back as `ok=False`. A service
    without a handler answers `ProfileConfigure` with ok (nothing to configure) and
    anything else with an error.
    """

    def __init__(self, dealer: DealerSocket[ToService], *, service_id: str,
                 service_type: ServiceType, group_id: str, lifecycle: Lifecycle,
                 heartbeat_interval_s: float) -> None:
        self._dealer, self._lifecycle = dealer, lifecycle
        self.service_id, self.service_type, self.group_id = service_id, service_type, group_id
        self._interval = heartbeat_interval_s

    async def register(self) -> None:
        """Announce this service (queued until the controller's ROUTER is reachable)."""
        await self._dealer.send(Register(service_id=self.service_id, service_type=self.service_type,
                                         pid=os.getpid(), host=socket.gethostname(),
                                         group_id=self.group_id))

    async def send_status(self) -> None:
        """Report the current lifecycle state now."""
        await self._dealer.send(ServiceStatus(service_id=self.service_id,
                                              state=self._lifecycle.state,
                                              error=self._lifecycle.error))

    async def heartbeat_loop(self) -> None:
        """Send a heartbeat every interval until cancelled."""
        while True:
            await self._dealer.send(Heartbeat(service_id=self.service_id,
                                              state=self._lifecycle.state,
                                              sent_at_ns=time.time_ns()))
            await anyio.sleep(self._interval)

    async def serve_commands(self, handle: Handler | None, *, on_shutdown: Callable[[str], None]) -> None:
        """Receive commands until cancelled. `Shutdown` is answered, then `on_shutdown` runs."""
        async with anyio.create_task_group() as tg:
            while True:
                command = await self._dealer.recv()
                if isinstance(command, Shutdown):
                    await self._reply(command.request_id, ok=True)
                    log.info("service.shutdown_requested", reason=command.reason)
                    on_shutdown(command.reason)
                    continue
                tg.start_soon(self._handle_one, handle, command)

    async def _handle_one(self, handle: Handler | None, command: Command) -> None:
        name = type(command).__name__
        if handle is None:
            if isinstance(command, ProfileConfigure):  # nothing to configure: ready as is
                await self._reply(command.request_id, ok=True)
            else:
                await self._reply(command.request_id, ok=False, error=f"{name} not supported")
            return
        try:
            result = await handle(command)
        except Exception as exc:  # the error travels back to the asker
            log.warning("command.failed", command=name, error=str(exc))
            await self._reply(command.request_id, ok=False, error=str(exc),
                              error_type=type(exc).__name__)
        else:
            await self._reply(command.request_id, ok=True, result=result)

    async def _reply(self, request_id: str, *, ok: bool, error: str = "", error_type: str = "",
                     result: dict[str, Any] | None = None) -> None:
        await self._dealer.send(CommandReply(request_id=request_id, service_id=self.service_id,
                                             ok=ok, error=error, result=result or {},
                                             error_type=error_type))
