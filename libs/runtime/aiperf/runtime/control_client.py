"""Service side of the `control` channel: register, heartbeat, obey commands, reply."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
import structlog

from aiperf.comms import BadMessage, DealerSocket
from aiperf.messages import (
    Ack,
    Command,
    CommandFailed,
    Heartbeat,
    ProfileConfigure,
    Register,
    Reply,
    ServiceStatus,
    ServiceType,
    Shutdown,
    ToService,
)
from aiperf.runtime.errors import UnknownCommand
from aiperf.runtime.lifecycle import Lifecycle

log = structlog.get_logger("aiperf.runtime.control")

Handler = Callable[[Command[Any]], Awaitable[Reply | None]]
"""A service's command handler: returns the reply (None for a plain `Ack`) without its
`request_id`/`service_id` (stamped here), or raises (the error travels back)."""


class _Envelope(msgspec.Struct):
    """What can be read of any command, even one this build does not know."""

    kind: str = "?"
    request_id: str = ""


class ControlClient:
    """Talks to the system-controller over one DEALER (identity = service id).

    `serve_commands` handles each command in its own task (a slow configure does not delay a
    `Shutdown`) and answers every command exactly once: the handler's reply, or `CommandFailed`
    when it raises, returns the wrong reply type, or the command is unknown (not decodable by
    this build, or not handled by this service). A service without a handler answers
    `ProfileConfigure` with `Ack` (nothing to configure) and anything else with `CommandFailed`.
    Undecodable frames never stop the loop.
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
                try:
                    command = await self._dealer.recv()
                except BadMessage as exc:
                    await self._refuse_undecodable(exc)
                    continue
                if isinstance(command, Shutdown):
                    await self._send(Ack(), command.request_id)
                    log.info("service.shutdown_requested", reason=command.reason)
                    on_shutdown(command.reason)
                    continue
                tg.start_soon(self._handle_one, handle, command)

    async def _refuse_undecodable(self, exc: BadMessage) -> None:
        try:
            envelope = msgspec.msgpack.decode(exc.frame, type=_Envelope)
        except (msgspec.DecodeError, ValueError):
            envelope = _Envelope()
        log.warning("command.undecodable", kind=envelope.kind, reason=exc.reason)
        if envelope.request_id:
            await self._send(CommandFailed(error=f"{self.service_id} cannot decode command "
                                                 f"{envelope.kind!r}: {exc.reason}",
                                           error_type=UnknownCommand.__name__), envelope.request_id)

    async def _handle_one(self, handle: Handler | None, command: Command[Any]) -> None:
        name = type(command).__name__
        try:
            if handle is None:
                if not isinstance(command, ProfileConfigure):
                    raise UnknownCommand(f"{self.service_type} does not handle {name}")
                reply: Reply = Ack()
            else:
                reply = await handle(command) or Ack()
            if not isinstance(reply, command.reply):
                raise TypeError(f"{name} was answered with {type(reply).__name__}, "
                                f"expected {command.reply.__name__}")
        except Exception as exc:  # the error travels back to the asker
            log.warning("command.failed", command=name, error=str(exc))
            reply = CommandFailed(error=str(exc), error_type=type(exc).__name__)
        await self._send(reply, command.request_id)

    async def _send(self, reply: Reply, request_id: str) -> None:
        await self._dealer.send(msgspec.structs.replace(reply, request_id=request_id,
                                                        service_id=self.service_id))
