"""Fake workers for a real timing-manager: the credit channels, spoken as the worker does."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import anyio
import structlog
import zmq.asyncio
from anyio.abc import TaskGroup, TaskStatus

from aiperf.comms import Addressing, Channel, DealerSocket, PushSocket
from aiperf.messages import (
    CancelCredits,
    Credit,
    CreditChannel,
    CreditReturn,
    Phase,
    TimePing,
    TimePong,
    WorkerConnected,
)

log = structlog.get_logger("aiperf.testing")


@dataclass
class _Worker:
    worker_id: str
    dealer: DealerSocket[CreditChannel]
    ponged: anyio.Event = field(default_factory=anyio.Event)
    in_flight: dict[tuple[Phase, int], anyio.CancelScope] = field(default_factory=dict)


@dataclass
class FakeWorkers:
    """`count` workers of group `group_id` (`worker-<group>-<i>`) on the timing-manager's channels:
    a DEALER each on `credits` (identity = worker id) and one shared PUSH on `credit_returns`.

    `announce` does what a real worker does before taking credits: a `TimePing` over `credits`
    until its `TimePong` comes back (so the credits route exists), then `WorkerConnected`. Each
    `Credit` is answered `latency_s` after its `scheduled_at_ns` with an ok `CreditReturn`
    (cancelled when the credit says `should_cancel`); `CancelCredits` returns the worker's
    in-flight credits of that phase as cancelled. Every return is kept in `returned`."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    count: int = 2
    group_id: str = "g0"
    latency_s: float = 0.02
    returned: list[CreditReturn] = field(default_factory=list)
    _workers: list[_Worker] = field(default_factory=list)
    _returns: PushSocket | None = None
    _tg: TaskGroup | None = None

    @property
    def ids(self) -> list[str]:
        """The workers' ids."""
        return [f"worker-{self.group_id}-{i}" for i in range(self.count)]

    async def run(self, *, task_status: TaskStatus[FakeWorkers] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect every socket and serve credits until cancelled (nothing is sent before
        `announce`)."""
        async with AsyncExitStack() as stack:
            self._returns = await stack.enter_async_context(PushSocket(
                self.ctx, channel="credit_returns",
                connect=[self.addressing.connect_endpoint(Channel.CREDIT_RETURNS)]))
            for worker_id in self.ids:
                dealer = await stack.enter_async_context(DealerSocket[CreditChannel](
                    self.ctx, identity=worker_id, decode=CreditChannel, channel="credits",
                    connect=[self.addressing.connect_endpoint(Channel.CREDITS)]))
                self._workers.append(_Worker(worker_id=worker_id, dealer=dealer))
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for worker in self._workers:
                    tg.start_soon(self._serve, worker)
                task_status.started(self)

    async def announce(self, *, timeout: float = 30.0, ping_every_s: float = 0.2) -> None:
        """Handshake every worker (ping until ponged, then `WorkerConnected`); raises
        `TimeoutError` when the timing-manager does not answer within `timeout`."""
        assert self._returns is not None, "announce before run"
        with anyio.fail_after(timeout):
            for seq, worker in enumerate(self._workers):
                worker.ponged = anyio.Event()
                while not worker.ponged.is_set():
                    await worker.dealer.send(TimePing(worker_id=worker.worker_id, seq=seq,
                                                      sent_at_ns=time.perf_counter_ns()))
                    with anyio.move_on_after(ping_every_s):
                        await worker.ponged.wait()
                await self._returns.send(WorkerConnected(worker_id=worker.worker_id, group_id=self.group_id))
                log.info("fake_worker.connected", worker=worker.worker_id)

    async def _serve(self, worker: _Worker) -> None:
        assert self._tg is not None
        while True:
            message = await worker.dealer.recv()
            match message:
                case TimePong():
                    worker.ponged.set()
                case Credit():
                    scope = anyio.CancelScope()
                    worker.in_flight[(message.phase, message.num)] = scope
                    self._tg.start_soon(self._answer, worker, message, scope)
                case CancelCredits(phase=phase):
                    for (credit_phase, _), scope in list(worker.in_flight.items()):
                        if credit_phase is phase:
                            scope.cancel()

    async def _answer(self, worker: _Worker, credit: Credit, scope: anyio.CancelScope) -> None:
        assert self._returns is not None
        delay_ns = max(0, credit.scheduled_at_ns - time.perf_counter_ns())
        latency_s = self.latency_s
        if credit.should_cancel:
            latency_s = min(latency_s, credit.cancel_after_ns / 1e9)
        with scope:
            await anyio.sleep(delay_ns / 1e9 + latency_s)
        worker.in_flight.pop((credit.phase, credit.num), None)
        cancelled = scope.cancel_called or credit.should_cancel
        ret = CreditReturn.of(credit, worker_id=worker.worker_id, ok=not cancelled, cancelled=cancelled,
                              error="RequestCancellationError" if cancelled else "")
        await self._returns.send(ret)
        self.returned.append(ret)
        log.info("fake_worker.credit_returned", worker=worker.worker_id, phase=str(credit.phase),
                 num=credit.num, conversation=credit.conversation_id, cancelled=cancelled)
