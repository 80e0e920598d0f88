"""Controller side of the `control` channel: registry of services, liveness, ask/reply.

The system-controller binds this ROUTER before any service starts and closes it after all
of them have stopped (it carries the shutdown command). Fakes of the controller in
`aiperf.testing` use the same class.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.comms import BadMessage, PendingReplies, RouterSocket
from aiperf.messages import (
    Command,
    CommandFailed,
    Heartbeat,
    Register,
    Reply,
    ServiceState,
    ServiceStatus,
    ServiceType,
    ToController,
)
from aiperf.runtime.errors import CommandError

log = structlog.get_logger("aiperf.runtime.control_server")

R = TypeVar("R", bound=Reply)


@dataclass(kw_only=True)
class ServiceInfo:
    """What the controller knows about one registered service instance."""

    service_id: str
    service_type: ServiceType
    pid: int
    host: str
    group_id: str
    state: ServiceState = ServiceState.STARTING
    error: str = ""
    last_seen: float = 0.0
    registered_wall_ns: int = 0
    running_wall_ns: int = 0
    """When it registered and when it first reported `running` (wall clock; start-up profile)."""


def _note_running(info: ServiceInfo) -> None:
    if not info.running_wall_ns and info.state is ServiceState.RUNNING:
        info.running_wall_ns = time.time_ns()


class RegistrationTimeout(Exception):
    """Some expected services did not register in time; `missing` names the shortfall."""

    def __init__(self, missing: dict[ServiceType, int]) -> None:
        self.missing = missing
        parts = ", ".join(f"{n} x {t}" for t, n in sorted(missing.items()))
        super().__init__(f"services never registered: {parts}")


class ControlServer:
    """Receives `ToController` messages and tracks every service that registered.

    Only a peer's own registration counts (identity = service id) and, with `planned` (service id
    -> type), only the run's planned instances; a reply settles an ask only when it comes from
    the service asked. Anything else is logged and dropped."""

    def __init__(self, router: RouterSocket[ToController], *, clock: Callable[[], float] = time.monotonic,
                 planned: Mapping[str, ServiceType] | None = None) -> None:
        self._router, self._clock, self._planned = router, clock, planned
        self.services: dict[str, ServiceInfo] = {}
        self._pending: PendingReplies[Reply] = PendingReplies()
        self._changed = anyio.Event()
        self._ids = itertools.count()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Receive and apply messages until cancelled."""
        task_status.started()
        while True:
            try:
                peer, message = await self._router.recv()
            except BadMessage as exc:
                log.warning("control.bad_message", peer=exc.peer, reason=exc.reason)
                continue
            self._apply(peer.decode(errors="replace"), message)

    def _apply(self, peer: str, message: ToController) -> None:
        now = self._clock()
        match message:
            case Register():
                if not self._admits(peer, message):
                    return
                self.services[peer] = ServiceInfo(
                    service_id=message.service_id, service_type=message.service_type,
                    pid=message.pid, host=message.host, group_id=message.group_id, last_seen=now,
                    registered_wall_ns=time.time_ns())
                log.debug("control.registered", peer=peer, type=str(message.service_type))
            case Heartbeat():
                if (info := self.services.get(peer)) is not None:
                    info.last_seen, info.state = now, message.state
                    _note_running(info)
            case ServiceStatus():
                if (info := self.services.get(peer)) is not None:
                    info.last_seen, info.state, info.error = now, message.state, message.error
                    _note_running(info)
            case Reply():
                if not self._pending.resolve(message.request_id, message, sender=peer):
                    log.warning("control.unexpected_reply", peer=peer, request_id=message.request_id,
                                kind=type(message).__name__)
        self._notify()

    def _admits(self, peer: str, message: Register) -> bool:
        """A registration is taken only under the sender's own identity and, when the run's
        instances are known, only for one of them with its planned type."""
        planned = self._planned
        why = ("its identity is another service's" if peer != message.service_id else
               "not a service of this run" if planned is not None and planned.get(peer) != message.service_type
               else "")
        if why:
            log.warning("control.registration_refused", peer=peer, service_id=message.service_id,
                        type=str(message.service_type), why=why)
        return not why

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_changed(self) -> None:
        """Block until the next message changes the registry."""
        await self._changed.wait()

    def registered_counts(self) -> Counter[ServiceType]:
        """Registered instances per service type."""
        return Counter(info.service_type for info in self.services.values())

    def missing(self, expected: dict[ServiceType, int]) -> dict[ServiceType, int]:
        """How many instances of each type are still to register."""
        have = self.registered_counts()
        return {t: n - have[t] for t, n in expected.items() if have[t] < n}

    async def wait_registered(self, expected: dict[ServiceType, int], *, timeout: float) -> None:
        """Block until every expected instance has registered; raises `RegistrationTimeout`."""
        with anyio.move_on_after(timeout):
            while self.missing(expected):
                await self.wait_changed()
            return
        raise RegistrationTimeout(self.missing(expected))

    def failed(self) -> list[ServiceInfo]:
        """Services that reported `failed`."""
        return [s for s in self.services.values() if s.state is ServiceState.FAILED]

    def silent(self, *, timeout: float) -> list[ServiceInfo]:
        """Running services whose last message is older than `timeout` seconds."""
        now = self._clock()
        return [s for s in self.services.values()
                if s.state in (ServiceState.STARTING, ServiceState.RUNNING)
                and now - s.last_seen > timeout]

    def new_request_id(self, prefix: str) -> str:
        """A request id unique within this controller and not guessable by other peers."""
        return f"{prefix}-{next(self._ids)}-{secrets.token_hex(6)}"

    async def ask(self, service_id: str, command: Command[R], *, timeout: float) -> R:
        """Send `command` to one service and wait for its reply, an instance of `command.reply`.

        Raises `AskTimeout`, `PeerUnreachable` (the service is gone), or `CommandError` when
        the service refused (`CommandFailed`) or answered with another reply type."""
        name = type(command).__name__
        reply = await self._pending.ask(
            command.request_id, lambda: self._router.send(service_id.encode(), command),
            target=service_id, timeout=timeout)
        if isinstance(reply, CommandFailed):
            raise CommandError(service_id, name, reply.error, reply.error_type)
        if not isinstance(reply, command.reply):
            raise CommandError(service_id, name, f"unexpected reply {type(reply).__name__}, "
                                                 f"expected {command.reply.__name__}")
        return reply  # type: ignore[return-value]  # checked: command.reply is R

    async def ask_all(self, service_ids: Iterable[str], make: Callable[[str, str], Command[R]], *,
                      timeout: float) -> dict[str, R | Exception]:
        """Ask each service concurrently (`make(service_id, request_id)` builds its command);
        returns each one's reply or the exception its ask raised, once all are in."""
        results: dict[str, R | Exception] = {}

        async def one(sid: str) -> None:
            try:
                results[sid] = await self.ask(sid, make(sid, self.new_request_id(sid)), timeout=timeout)
            except Exception as exc:
                results[sid] = exc

        async with anyio.create_task_group() as tg:
            for sid in service_ids:
                tg.start_soon(one, sid)
        return results
