"""Small scripted peers speaking the real wire protocol over real sockets."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import structlog
import zmq.asyncio
from anyio.abc import TaskStatus

from aiperf.comms import Addressing, Channel, PullSocket, RouterSocket
from aiperf.messages import (
    Credit,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    MetricRecord,
    MetricRecordBatch,
    Phase,
    RecordChannel,
    RequestRecord,
    TimePing,
    TimePong,
    ToController,
    WorkerConnected,
)
from aiperf.runtime.control_server import ControlServer

log = structlog.get_logger("aiperf.testing")


class FakeController:
    """The controller's ROUTER and registry, without launching anything."""

    def __init__(self, ctx: zmq.asyncio.Context, addressing: Addressing) -> None:
        self._router = RouterSocket[ToController](ctx, decode=ToController, channel="control",
                                                  bind=addressing.bind_endpoints(Channel.CONTROL))
        self.control: ControlServer | None = None

    async def run(self, *, task_status: TaskStatus[ControlServer] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, start receiving, report the `ControlServer`; run until cancelled."""
        async with self._router as router:
            self.control = ControlServer(router)
            async with anyio.create_task_group() as tg:
                await tg.start(self.control.run)
                task_status.started(self.control)


@dataclass
class FakeTimingManager:
    """Answers clock pings, registers connected workers and gives each of them
    `credits_per_worker` credits one at a time (closed loop, concurrency 1 per worker)."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    conversation_ids: Callable[[int], str] = field(default=lambda n: f"session_{n:06d}")
    credits_per_worker: int = 3
    returns: list[CreditReturn] = field(default_factory=list)
    connected: list[str] = field(default_factory=list)
    armed: anyio.Event = field(default_factory=anyio.Event)
    """Credits flow only once this is set (after the worker answered `ProfileConfigure`)."""
    _returned: anyio.Event = field(default_factory=anyio.Event)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the credit channels until cancelled."""
        async with (RouterSocket[TimePing](self.ctx, decode=CreditUpstream, channel="credits",
                                           bind=self.addressing.bind_endpoints(Channel.CREDITS)) as router,
                    PullSocket[CreditReturnChannel](
                        self.ctx, decode=CreditReturnChannel, channel="credit_returns",
                        bind=self.addressing.bind_endpoints(Channel.CREDIT_RETURNS)) as pull,
                    anyio.create_task_group() as tg):
            tg.start_soon(self._pongs, router)
            task_status.started()
            while True:
                message = await pull.recv()
                match message:
                    case WorkerConnected():
                        self.connected.append(message.worker_id)
                        log.info("fake_tm.worker_connected", worker=message.worker_id)
                        tg.start_soon(self._feed, router, message.worker_id)
                    case CreditReturn():
                        self.returns.append(message)
                        log.info("fake_tm.credit_returned", worker=message.worker_id, num=message.num,
                                 ok=message.ok, error=message.error)
                        self._returned.set()
                        self._returned = anyio.Event()

    async def _pongs(self, router: RouterSocket[TimePing]) -> None:
        while True:
            peer, ping = await router.recv()
            await router.send(peer, TimePong(seq=ping.seq, ping_sent_at_ns=ping.sent_at_ns,
                                             received_at_ns=time.perf_counter_ns()))

    async def _feed(self, router: RouterSocket[TimePing], worker_id: str) -> None:
        await self.armed.wait()
        for n in range(self.credits_per_worker):
            before = sum(1 for r in self.returns if r.worker_id == worker_id)
            await router.send(worker_id.encode(), Credit(
                phase=Phase.PROFILING, num=n, conversation_id=self.conversation_ids(n),
                issued_at_ns=time.perf_counter_ns()))
            while sum(1 for r in self.returns if r.worker_id == worker_id) <= before:
                await self._returned.wait()


@dataclass
class FakeRecordProcessor:
    """Binds one record-processor's `raw_records` endpoint and keeps what arrives."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    index: str = "g0-0"
    records: list[RequestRecord] = field(default_factory=list)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with PullSocket[RequestRecord](
                self.ctx, decode=RequestRecord, channel="raw_records",
                bind=[self.addressing.ipc(Channel.RAW_RECORDS, index=self.index)]) as pull:
            task_status.started()
            while True:
                record = await pull.recv()
                self.records.append(record)
                took_ms = (record.end_ns - record.start_ns) / 1e6 if record.end_ns else None
                log.info("fake_rp.record", worker=record.worker_id, num=record.credit_num,
                         status=record.status, chunks=len(record.chunks), took_ms=took_ms,
                         error=record.error.message if record.error else None)


@dataclass
class FakeRecordsManager:
    """Binds the `records` channel and keeps every `MetricRecord` of the batches it receives."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    records: list[MetricRecord] = field(default_factory=list)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with PullSocket[MetricRecordBatch](self.ctx, decode=RecordChannel, channel="records",
                                                 bind=self.addressing.bind_endpoints(Channel.RECORDS)) as pull:
            task_status.started()
            while True:
                for record in (await pull.recv()).records:
                    self.records.append(record)
                    log.info("fake_rm.record", num=record.credit_num, metrics=sorted(record.metrics))
