"""Fakes at the control channel: a ROUTER stand-in under a real `ControlServer`, scripted
services answering commands, and a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from aiperf.config import ServiceCounts
from aiperf.messages import (
    Ack,
    Command,
    CommandFailed,
    Heartbeat,
    Register,
    Reply,
    ServiceState,
    ToController,
)
from aiperf.system_controller.plan import plan_services

Answer = Reply | Exception | None
"""What a scripted service does with a command: reply this (its ids are filled in), fail with
this error, or (None) not answer yet."""


def _ack(sid: str, command: Command[Any]) -> Answer:
    return Ack()


@dataclass
class FakeClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeRouter:
    """`RouterSocket` stand-in: `recv` returns what the fake services sent, `send` records the
    command and lets `answer` script the reply."""

    answer: Callable[[str, Command[Any]], Answer] = _ack
    sent: list[tuple[str, Command[Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._tx, self._rx = anyio.create_memory_object_stream[tuple[bytes, ToController]](10_000)

    def close(self) -> None:
        self._tx.close()
        self._rx.close()

    async def recv(self) -> tuple[bytes, ToController]:
        return await self._rx.receive()

    async def send(self, peer: bytes, command: Command[Any]) -> None:
        sid = peer.decode()
        self.sent.append((sid, command))
        outcome = self.answer(sid, command)
        if outcome is not None:
            self.reply(sid, command, outcome)

    def reply(self, sid: str, command: Command[Any], outcome: Reply | Exception) -> None:
        if isinstance(outcome, Exception):
            outcome = CommandFailed(error=str(outcome), error_type=type(outcome).__name__)
        self.deliver(sid, msgspec.structs.replace(outcome, request_id=command.request_id, service_id=sid))

    def deliver(self, sid: str, message: ToController) -> None:
        self._tx.send_nowait((sid.encode(), message))

    def register_plan(self, counts: ServiceCounts, *, skip: frozenset[str] = frozenset()) -> list[str]:
        """Register (and mark running) every planned service except `skip`; their ids."""
        ids = []
        for planned in plan_services(counts):
            if planned.service_id in skip:
                continue
            self.deliver(planned.service_id, Register(service_id=planned.service_id,
                                                      service_type=planned.service_type, pid=1,
                                                      group_id=planned.group_id))
            self.heartbeat(planned.service_id)
            ids.append(planned.service_id)
        return ids

    def heartbeat(self, *sids: str) -> None:
        for sid in sids:
            self.deliver(sid, Heartbeat(service_id=sid, state=ServiceState.RUNNING))


def group_of(service_id: str) -> str:
    """`worker-g1-0` -> `g1`, `worker-group-manager-g1` -> `g1`, else ``""``."""
    for part in reversed(service_id.split("-")):
        if part.startswith("g") and part[1:].isdigit():
            return part
    return ""
