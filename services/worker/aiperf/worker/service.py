"""Takes credits, sends the HTTP requests, timestamps every chunk, pushes raw records and
returns credits.

Per credit the worker does as little as it can: one conversation lookup in the memory-mapped
dataset, one payload build, the HTTP exchange (every network read kept as raw bytes with its
`perf_counter_ns`), one `RequestRecord` pushed to its group's record-processors and then one
`CreditReturn` pushed to the timing-manager. Parsing and metrics happen elsewhere.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiperf.comms import BadMessage
from aiperf.config import Endpoint
from aiperf.dataset import Conversation, DatasetError, DatasetReader
from aiperf.endpoints import EndpointType, FirstContent, PayloadBuilder, parse_response, spec_of
from aiperf.messages import (
    CancelCredits,
    ClientLoad,
    Command,
    Credit,
    CreditAudit,
    CreditChannel,
    CreditReturn,
    ErrorDetails,
    FirstToken,
    HeldCredits,
    Phase,
    ProfileConfigure,
    Reply,
    RequestRecord,
    TimePing,
    TimePong,
    WorkerConnected,
    WorkerLeaving,
)
from aiperf.runtime import GiveUp, UnknownCommand, UserError
from aiperf.worker.clock import SPIN_NS, ClockSample, OffsetTracker, estimate_offset, wait_until
from aiperf.worker.exchange import Exchange, Transport
from aiperf.worker.load import TICK_S, LoadMonitor

log = structlog.get_logger("aiperf.worker")

_perf_ns = time.perf_counter_ns

CANCELLED_TYPE = "RequestCancellationError"
CANCELLED_CODE = 499
"""What AIPerf records for a request the client cancelled."""


class CreditLink(Protocol):
    """The worker's end of the `credits` channel (a `DealerSocket` in production)."""

    async def send(self, message: object) -> None: ...

    async def recv(self) -> CreditChannel: ...


class Sink(Protocol):
    """A push channel (`credit_returns`, `raw_records`); `send` waits only at the HWM,
    `send_nowait` raises `anyio.WouldBlock` there."""

    async def send(self, message: object) -> None: ...

    def send_nowait(self, message: object) -> None: ...


class Conversations(Protocol):
    """Read side of the dataset (a `DatasetReader` in production)."""

    def conversation_by_id(self, conversation_id: str) -> Conversation: ...

    def ids(self) -> list[str]: ...

    def close(self) -> None: ...


Probe = Callable[[WorkerConnected], Awaitable[bool]]
"""Sends the hello on `credit_returns` once the path exists; False: not sent (send it normally)."""

OpenDataset = Callable[[str], Conversations]


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """Identity and tuning of one worker.

    `headers` are added to every request after Content-Type (Authorization, user headers).
    `measure_clock_offset` (Kubernetes mode) estimates the offset to the timing-manager's
    clock from `clock_samples` pings, then keeps it current from the credits' stamps
    (`OffsetTracker`); otherwise the offset is 0. The credits handshake must
    succeed within `handshake_timeout_s`, retrying every `ping_interval_s`. On stop, pushing
    the last records and returns may take at most `stop_flush_s`. Scheduled credits sleep
    until `schedule_spin_ns` before their time, then yield in a loop until it (see
    `aiperf.worker.clock.wait_until`). `load_tick_s` is the period of the event-loop lag probe
    (`aiperf.worker.load`; 0: no probe, records carry no `client_load`).
    """

    worker_id: str
    group_id: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    measure_clock_offset: bool = False
    clock_samples: int = 20
    handshake_timeout_s: float = 30.0
    ping_interval_s: float = 0.25
    stop_flush_s: float = 1.0
    schedule_spin_ns: int = SPIN_NS
    load_tick_s: float = TICK_S


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    """Everything `ProfileConfigure` fixed for the requests of the run."""

    reader: Conversations
    builder: PayloadBuilder
    builders: dict[str, PayloadBuilder]  # by a turn's own model (several models), filled on first use
    urls: list[str]
    headers: dict[str, str]
    streaming: bool
    endpoint: str
    model: str
    timeout_s: float
    keeps_history: bool
    reuse: str


class _Flight:
    """One credit from arrival to return."""

    __slots__ = ("credit", "received_ns", "scope", "cancel_reason", "cancelled", "ex", "error",
                 "input_tokens", "output_limit", "request_id", "prompt", "more_turns", "stage", "model")

    def __init__(self, credit: Credit, received_ns: int) -> None:
        self.credit = credit
        self.received_ns = received_ns
        self.scope = anyio.CancelScope()
        self.cancel_reason: str | None = None
        self.cancelled = False
        self.ex = Exchange()
        self.error: ErrorDetails | None = None
        self.input_tokens: int | None = None
        self.output_limit: int | None = None
        self.request_id = ""
        self.prompt = ""
        self.more_turns = False
        self.stage = 0  # 1: record pushed, 2: credit returned
        self.model: str | None = None  # the turn's own model, when it names one


class Worker:
    """Runs one request per credit, concurrently, each in a task of `run`'s task group.

    Contract: every `Credit` received is answered by exactly one `RequestRecord` on `records`
    followed by exactly one `CreditReturn` on `returns`, whatever happened (success, HTTP
    error, transport error, timeout, cancellation, a credit naming an unknown conversation,
    the worker stopping while the sockets are still open). A credit with `report_first_token`
    whose answer streams is also answered by one `FirstToken` on `returns` when the first
    content arrives (none when no content does). Must be constructed inside the event loop.
    """

    def __init__(self, *, settings: WorkerSettings, endpoint: Endpoint, model: str,
                 credits: CreditLink, returns: Sink, records: Sink, transport: Transport,
                 probe: Probe, open_dataset: OpenDataset = DatasetReader) -> None:
        self._settings, self._endpoint, self._model = settings, endpoint, model
        self._credits, self._returns, self._records = credits, returns, records
        self._transport, self._probe, self._open_dataset = transport, probe, open_dataset
        self.worker_id = settings.worker_id
        self.clock_offset_ns = 0
        self._tracker: OffsetTracker | None = None
        """local perf_counter_ns = timing-manager perf_counter_ns + offset."""
        self.connected = anyio.Event()
        """Set once `WorkerConnected` went out on `credit_returns`."""
        self._target: _Target | None = None
        self._configured = anyio.Event()
        self._inflight: set[_Flight] = set()
        self._history: dict[str, list[dict[str, Any]]] = {}
        self._ping_seq = 0
        self._pong_wait: tuple[int, anyio.Event] | None = None
        self._pong: ClockSample | None = None
        self._load = (LoadMonitor(busy=lambda: bool(self._inflight), tick_s=settings.load_tick_s)
                      if settings.load_tick_s > 0 else None)
        self._first_tokens: MemoryObjectSendStream[FirstToken] | None = None
        """FirstToken messages queued from the read callback, sent on `returns` by `run`'s task."""
        self.records_waited = 0
        """Records whose push waited: the record-processors were a full queue behind."""

    @property
    def in_flight(self) -> int:
        """Credits received and not yet returned."""
        return len(self._inflight)

    def load(self) -> ClientLoad | None:
        """This process's event-loop lag and CPU so far (None: `load_tick_s` is 0)."""
        return self._load.snapshot() if self._load is not None else None

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once (the credits loop runs); then proves the credits channel both ways
        (TimePing/TimePong), estimates the clock offset (Kubernetes) and announces
        `WorkerConnected`. Runs until cancelled; on the way out,
        in-flight credits are returned as cancelled and `WorkerLeaving` is sent (best effort).
        Raises `GiveUp` when the timing-manager never answers a ping."""
        self._first_tokens, first_tokens = anyio.create_memory_object_stream[FirstToken](math.inf)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._receive, tg)
                tg.start_soon(self._send_first_tokens, first_tokens)
                if self._load is not None:
                    tg.start_soon(self._load.run)
                task_status.started()
                await self._handshake()
        finally:
            if self.connected.is_set():
                with anyio.move_on_after(self._settings.stop_flush_s, shield=True):
                    await self._returns.send(WorkerLeaving(worker_id=self.worker_id))
            self._first_tokens.close()
            first_tokens.close()
            self.close()

    def close(self) -> None:
        """Release the dataset mapping; idempotent."""
        target, self._target = self._target, None
        if target is not None:
            target.reader.close()

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`ProfileConfigure(dataset_dir=D)`: open the dataset and fix the request target.
        Raises `UserError` for an unreadable dataset, `GiveUp` without a dataset folder, and
        `UnknownCommand` for any other command."""
        if not isinstance(command, ProfileConfigure):
            raise UnknownCommand(f"the worker does not handle {type(command).__name__}")
        await self._configure(command.dataset_dir)
        return None

    async def _configure(self, directory: str) -> None:
        if not directory:
            raise GiveUp("ProfileConfigure needs dataset_dir")
        try:
            reader = await anyio.to_thread.run_sync(self._open_indexed, directory)
        except DatasetError as exc:
            raise UserError(str(exc)) from exc
        endpoint = self._endpoint
        kind = spec_of(endpoint.type)
        streaming = endpoint.streaming and kind.streams
        self.close()
        self._target = _Target(
            reader=reader, builder=PayloadBuilder.of(endpoint, self._model), builders={}, urls=endpoint.request_urls(kind.path),
            headers={"Content-Type": "application/json", **self._settings.headers},
            streaming=streaming, endpoint=str(kind.kind), model=self._model, timeout_s=endpoint.timeout or math.inf,
            keeps_history=kind.keeps_history, reuse=endpoint.connection_reuse)
        self._configured.set()
        log.info("worker.configured", urls=self._target.urls, streaming=streaming, dataset=directory)

    def _open_indexed(self, directory: str) -> Conversations:
        reader = self._open_dataset(directory)
        try:
            ids = reader.ids()
            if ids:  # builds the id -> position map now, not on the first credit
                reader.conversation_by_id(ids[0])
        except BaseException:
            reader.close()
            raise
        return reader

    # -- credits channel ---------------------------------------------------------------------

    async def _send_first_tokens(self, queue: MemoryObjectReceiveStream[FirstToken]) -> None:
        async for message in queue:
            await self._returns.send(message)

    def _watch_first_token(self, flight: _Flight, kind: EndpointType) -> None:
        """Queue a `FirstToken` for `flight` when its first content arrives (prefill slots)."""
        watch, credit, ex, queue = FirstContent(kind), flight.credit, flight.ex, self._first_tokens
        if queue is None:
            return

        def on_chunk(data: bytes, ts_ns: int) -> None:
            if watch.feed(data, ts_ns):
                ex.on_chunk = None
                message = FirstToken(worker_id=self.worker_id, phase=credit.phase, num=credit.num,
                                     at_ns=ts_ns - self.clock_offset_ns)
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    queue.send_nowait(message)  # closed: the worker is stopping

        ex.on_chunk = on_chunk

    async def _receive(self, tg: TaskGroup) -> None:
        recv, inflight, serve = self._credits.recv, self._inflight, self._serve
        while True:
            try:
                msg = await recv()
            except BadMessage as exc:
                log.warning("worker.bad_message", channel=exc.channel, reason=exc.reason)
                continue
            now = _perf_ns()
            if type(msg) is Credit:
                if self._tracker is not None:
                    self.clock_offset_ns = self._tracker.observe(msg.issued_at_ns, now)
                flight = _Flight(msg, now)
                inflight.add(flight)
                tg.start_soon(serve, flight)
            elif isinstance(msg, CancelCredits):
                self._cancel_phase(msg.phase, msg.reason or "cancelled")
            elif isinstance(msg, TimePong):
                self._on_pong(msg, now)
            elif isinstance(msg, CreditAudit):
                await self._returns.send(self._held(msg.seq))

    def _held(self, seq: int) -> HeldCredits:
        """The answer to audit `seq`: every credit received and not yet returned."""
        held: dict[Phase, list[int]] = {}
        for flight in self._inflight:
            if flight.stage < 2:
                held.setdefault(flight.credit.phase, []).append(flight.credit.num)
        return HeldCredits(worker_id=self.worker_id, seq=seq, held=held)

    def _cancel_phase(self, phase: Phase, reason: str) -> None:
        count = 0
        for flight in self._inflight:
            if flight.credit.phase == phase and flight.cancel_reason is None:
                flight.cancel_reason = reason
                flight.scope.cancel()
                self._history.pop(flight.credit.conversation_id, None)
                count += 1
        log.info("worker.credits_cancelled", phase=str(phase), count=count, reason=reason)

    def _on_pong(self, pong: TimePong, now: int) -> None:
        wait = self._pong_wait
        if wait is not None and wait[0] == pong.seq and not wait[1].is_set():
            self._pong = ClockSample(pong.ping_sent_at_ns, pong.received_at_ns, now)
            wait[1].set()

    async def _sample_clock(self, timeout_s: float) -> ClockSample | None:
        """One TimePing; the sample of its TimePong, or None when none came within `timeout_s`."""
        self._ping_seq += 1
        event = anyio.Event()
        self._pong_wait = (self._ping_seq, event)
        try:
            await self._credits.send(TimePing(worker_id=self.worker_id, seq=self._ping_seq,
                                              sent_at_ns=_perf_ns()))
            with anyio.move_on_after(timeout_s):
                await event.wait()
        finally:
            self._pong_wait = None
        return self._pong if event.is_set() else None

    async def _handshake(self) -> None:
        s = self._settings
        deadline = anyio.current_time() + s.handshake_timeout_s
        samples: list[ClockSample] = []
        while not samples:
            if anyio.current_time() >= deadline:
                raise GiveUp(f"timing-manager did not answer TimePing on the credits channel "
                             f"within {s.handshake_timeout_s:g}s")
            if (sample := await self._sample_clock(s.ping_interval_s)) is not None:
                samples.append(sample)
        if s.measure_clock_offset:
            while len(samples) < s.clock_samples and anyio.current_time() < deadline:
                if (sample := await self._sample_clock(s.ping_interval_s)) is not None:
                    samples.append(sample)
            self.clock_offset_ns = estimate_offset(samples)
            self._tracker = OffsetTracker(self.clock_offset_ns, min(x.received_ns - x.sent_ns for x in samples))
        hello = WorkerConnected(worker_id=self.worker_id, group_id=s.group_id,
                                clock_offset_ns=self.clock_offset_ns)
        if not await self._probe(hello):
            with anyio.fail_after(max(deadline - anyio.current_time(), s.ping_interval_s)):
                await self._returns.send(hello)
        self.connected.set()
        log.info("worker.connected", clock_offset_ns=self.clock_offset_ns, samples=len(samples),
                 min_rtt_ns=min(x.received_ns - x.sent_ns for x in samples))

    # -- one request -------------------------------------------------------------------------

    async def _serve(self, flight: _Flight) -> None:
        try:
            try:
                await self._perform(flight)
            except Exception as exc:  # a bad credit or a bug: the credit still comes back, failed
                log.warning("worker.request_failed", num=flight.credit.num,
                            error=f"{type(exc).__name__}: {exc}")
                flight.error = ErrorDetails(type=type(exc).__name__, message=str(exc))
            await self._finish(flight)
        except anyio.get_cancelled_exc_class():
            # The worker is stopping: return the credit as cancelled while the sockets are open.
            if flight.stage == 0:
                flight.cancelled = True
                flight.error = ErrorDetails(type=CANCELLED_TYPE, message="worker stopping",
                                            code=CANCELLED_CODE)
            if flight.stage < 2:
                with anyio.move_on_after(self._settings.stop_flush_s, shield=True):
                    await self._finish(flight)
            raise
        finally:
            self._inflight.discard(flight)

    async def _perform(self, flight: _Flight) -> None:
        target = self._target
        if target is None:
            await self._configured.wait()
            target = self._target
            assert target is not None
        credit = flight.credit
        try:
            turns = target.reader.conversation_by_id(credit.conversation_id).turns
            turn = turns[credit.turn_index]
        except (KeyError, IndexError):
            raise LookupError(f"conversation {credit.conversation_id!r} turn {credit.turn_index} "
                              f"is not in the dataset") from None
        flight.input_tokens = turn.input_tokens
        history = None
        if target.keeps_history:
            flight.more_turns = credit.turn_index + 1 < len(turns)
            if flight.more_turns:
                flight.prompt = turn.text
            if credit.turn_index:
                history = self._history.get(credit.conversation_id)
        builder = target.builder
        if turn.model is not None:
            flight.model = turn.model
            builder = target.builders.get(turn.model) or target.builders.setdefault(
                turn.model, builder.for_model(turn.model))
        body = builder.build(turn.text, max_tokens=turn.max_tokens, history=history, texts=turn.texts,
                             images=turn.images, audios=turn.audios)
        flight.output_limit = builder.output_limit(turn.max_tokens)
        flight.request_id = request_id = uuid.uuid4().hex
        headers = {**target.headers, "X-Request-ID": request_id}
        limit_s, cancels = target.timeout_s, False
        if credit.should_cancel and credit.cancel_after_ns / 1e9 <= limit_s:
            limit_s, cancels = credit.cancel_after_ns / 1e9, True
        ex = flight.ex
        if credit.report_first_token and target.streaming:
            self._watch_first_token(flight, EndpointType(target.endpoint))
        with flight.scope as scope:
            if credit.scheduled_at_ns:
                await wait_until(credit.scheduled_at_ns + self.clock_offset_ns,
                                 spin_ns=self._settings.schedule_spin_ns)
            scope.deadline = anyio.current_time() + limit_s
            url = target.urls[credit.url_index % len(target.urls)]
            lane, keep = None, target.reuse == "pooled"
            if target.reuse == "sticky-user-sessions":
                lane, keep = credit.conversation_id, credit.turn_index + 1 < len(turns)
            await self._transport.post(ex, url, body, headers, streaming=target.streaming, lane=lane, keep=keep)
        if scope.cancelled_caught:
            if flight.cancel_reason is not None:
                flight.cancelled = True
                flight.error = ErrorDetails(type=CANCELLED_TYPE, code=CANCELLED_CODE,
                                            message=f"Request was cancelled: {flight.cancel_reason}")
            elif cancels:
                flight.cancelled = True
                flight.error = ErrorDetails(
                    type=CANCELLED_TYPE, code=CANCELLED_CODE,
                    message=f"Request was cancelled after {credit.cancel_after_ns / 1e6:g} ms")
            else:
                flight.error = ErrorDetails(
                    type="RequestTimeout",
                    message=f"no complete response within {target.timeout_s:g}s "
                            f"(--request-timeout-seconds)")

    async def _finish(self, flight: _Flight) -> None:
        """Push the record, then return the credit (that order is the contract). Resumes
        where an interrupted call stopped, so neither is ever sent twice."""
        credit, ex = flight.credit, flight.ex
        error = flight.error or ex.error
        ok = error is None and ex.status < 400
        if flight.stage == 0:
            await self._push_record(flight, error, ok)
            flight.stage = 1
        reason = error.type if error is not None else (f"HTTP {ex.status}" if not ok else "")
        await self._returns.send(CreditReturn.of(credit, worker_id=self.worker_id, ok=ok,
                                                 cancelled=flight.cancelled, sent=ex.start_ns > 0,
                                                 error=reason))
        flight.stage = 2

    async def _push_record(self, flight: _Flight, error: ErrorDetails | None, ok: bool) -> None:
        credit, ex, target = flight.credit, flight.ex, self._target
        record = RequestRecord(
            worker_id=self.worker_id, phase=credit.phase, credit_num=credit.num,
            conversation_id=credit.conversation_id, turn_index=credit.turn_index,
            model=flight.model or (target.model if target else ""), endpoint=target.endpoint if target else "",
            streaming=target.streaming if target else False, input_tokens=flight.input_tokens,
            credit_issued_ns=credit.issued_at_ns, scheduled_ns=credit.scheduled_at_ns,
            credit_received_ns=flight.received_ns, start_ns=ex.start_ns,
            start_wall_ns=ex.start_wall_ns, response_headers_ns=ex.headers_ns, end_ns=ex.end_ns,
            status=ex.status, chunk_ns=ex.chunk_ns, chunks=ex.chunks, error=error,
            cancelled=flight.cancelled, clock_offset_ns=self.clock_offset_ns,
            x_request_id=flight.request_id, requested_output_tokens=flight.output_limit,
            http=ex.http_trace(),
            client_load=self._load.snapshot_due(ex.end_ns or _perf_ns(), ending=len(self._inflight) <= 1)
            if self._load is not None else None)
        try:
            self._records.send_nowait(record)
        except anyio.WouldBlock:
            self._records_backlogged()
            await self._records.send(record)
        if target is not None and target.keeps_history:
            self._remember(flight, record, ok)

    def _records_backlogged(self) -> None:
        """Count a record that waits to be pushed; warn at the first (the run now slows to
        what the record-processors take, since credits return after their records)."""
        self.records_waited += 1
        if self.records_waited == 1:
            log.warning("worker.records_backlogged", worker_id=self.worker_id,
                        hint="the record-processors are a full queue behind: requests return their "
                             "credits late, so the load is lower than asked; add --record-processors")

    def _remember(self, flight: _Flight, record: RequestRecord, ok: bool) -> None:
        """Keep a multi-turn chat's history for its next turn; forget it after the last."""
        conversation_id = flight.credit.conversation_id
        if not flight.more_turns or flight.cancelled:
            self._history.pop(conversation_id, None)
            return
        answer = parse_response(EndpointType.CHAT, record.streaming, record).text if ok else ""
        self._history.setdefault(conversation_id, []).extend((
            {"role": "user", "content": flight.prompt},
            {"role": "assistant", "content": answer}))
