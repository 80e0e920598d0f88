"""Fakes at the worker's ports: the credits link, push sinks, the HTTP transport."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiperf.config import Endpoint
from aiperf.messages import (
    CreditChannel,
    CreditReturn,
    ErrorDetails,
    ProfileConfigure,
    RequestRecord,
    TimePing,
    TimePong,
    WorkerConnected,
    WorkerLeaving,
)
from aiperf.worker.exchange import Exchange
from aiperf.worker.service import Worker, WorkerSettings

SSE_ANSWER = (b'data: {"choices":[{"delta":{"content":"hel"}}]}\n\n',
              b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\ndata: [DONE]\n\n')


class FakeCreditLink:
    """The timing-manager side of `credits`, in memory. Answers pings unless `answer_pings`
    is off; its clock reads `perf_counter_ns() - offset_ns` (so the worker's true offset is
    `offset_ns`)."""

    def __init__(self, *, answer_pings: bool = True, offset_ns: int = 0) -> None:
        self.tx: MemoryObjectSendStream[CreditChannel]
        self.rx: MemoryObjectReceiveStream[CreditChannel]
        self.tx, self.rx = anyio.create_memory_object_stream[CreditChannel](1000)
        self.answer_pings, self.offset_ns = answer_pings, offset_ns
        self.pings: list[TimePing] = []

    async def send(self, message: object) -> None:
        assert isinstance(message, TimePing)
        self.pings.append(message)
        if self.answer_pings:
            await self.tx.send(TimePong(seq=message.seq, ping_sent_at_ns=message.sent_at_ns,
                                        received_at_ns=time.perf_counter_ns() - self.offset_ns))

    async def recv(self) -> CreditChannel:
        return await self.rx.receive()

    def close(self) -> None:
        self.tx.close()
        self.rx.close()


class LogSink:
    """A push channel that appends `(name, message)` to a shared log and forwards to a stream."""

    def __init__(self, name: str, log: list[tuple[str, object]], buffer: int = 1000) -> None:
        self.name, self.log = name, log
        self.tx: MemoryObjectSendStream[object]
        self.rx: MemoryObjectReceiveStream[object]
        self.tx, self.rx = anyio.create_memory_object_stream[object](buffer)

    async def send(self, message: object) -> None:
        self.log.append((self.name, message))
        await self.tx.send(message)

    def send_nowait(self, message: object) -> None:
        self.tx.send_nowait(message)  # raises anyio.WouldBlock when the buffer is full
        self.log.append((self.name, message))

    def close(self) -> None:
        self.tx.close()
        self.rx.close()


@dataclass
class Posted:
    url: str
    body: dict[str, Any]
    headers: dict[str, str]
    streaming: bool


class FakeTransport:
    """Behaves by the last prompt: "ok" answers SSE, "http500" a 500, "refused" a transport
    error, "hang" never answers (until cancelled)."""

    def __init__(self) -> None:
        self.posted: list[Posted] = []
        self.started = anyio.Event()

    async def post(self, ex: Exchange, url: str, body: bytes, headers: Mapping[str, str], *,
                   streaming: bool, lane: str | None = None, keep: bool = True) -> None:
        decoded = orjson.loads(body)
        self.posted.append(Posted(url, decoded, dict(headers), streaming))
        prompt = decoded["messages"][-1]["content"]
        ex.start_wall_ns, ex.start_ns = time.time_ns(), time.perf_counter_ns()
        try:
            if prompt == "refused":
                ex.error = ErrorDetails(type="ConnectionError", message=f"cannot connect to {url}")
                return
            ex.headers_ns = time.perf_counter_ns()
            ex.status = 500 if prompt == "http500" else 200
            if prompt == "hang":
                self.started.set()
                await anyio.sleep_forever()
            for chunk in SSE_ANSWER if ex.status == 200 else (b'{"error":{"message":"boom"}}',):
                ex.chunk_ns.append(time.perf_counter_ns())
                ex.chunks.append(chunk)
        finally:
            ex.end_ns = time.perf_counter_ns()


class FakeDataset:
    """`Conversations` over a dict; records `close`."""

    def __init__(self, conversations: dict[str, list[str]]) -> None:
        from aiperf.dataset import Conversation, Turn
        self._convs = {cid: Conversation(id=cid, turns=[Turn(text=t, input_tokens=len(t), max_tokens=4)
                                                         for t in texts])
                       for cid, texts in conversations.items()}
        self.closed = False

    def conversation_by_id(self, conversation_id: str) -> Any:
        return self._convs[conversation_id]

    def ids(self) -> list[str]:
        return list(self._convs)

    def close(self) -> None:
        self.closed = True


DEFAULT_CONVERSATIONS = {"ok": ["ok"], "http500": ["http500"], "refused": ["refused"],
                         "hang": ["hang"], "multi": ["ok", "again", "last"]}


@dataclass
class Harness:
    worker: Worker
    link: FakeCreditLink
    returns: LogSink
    records: LogSink
    transport: FakeTransport
    dataset: FakeDataset
    log: list[tuple[str, object]]
    hellos: list[WorkerConnected] = field(default_factory=list)

    async def next_return(self) -> CreditReturn:
        with anyio.fail_after(10):
            msg = await self.returns.rx.receive()
        assert isinstance(msg, CreditReturn), msg
        return msg

    async def next_record(self) -> RequestRecord:
        with anyio.fail_after(10):
            msg = await self.records.rx.receive()
        assert isinstance(msg, RequestRecord), msg
        return msg

    async def next_leaving(self) -> WorkerLeaving:
        with anyio.fail_after(10):
            msg = await self.returns.rx.receive()
        assert isinstance(msg, WorkerLeaving), msg
        return msg


def endpoint(**overrides: Any) -> Endpoint:
    """A streaming chat endpoint at a fake URL, with `overrides`."""
    return Endpoint(**{"urls": ["http://fake:1"], "streaming": True, **overrides})


@asynccontextmanager
async def running_worker(*, settings: WorkerSettings | None = None,
                         target: Endpoint | None = None, configure: bool = True,
                         link: FakeCreditLink | None = None,
                         conversations: dict[str, list[str]] | None = None,
                         records_buffer: int = 1000) -> AsyncIterator[Harness]:
    """A `Worker` on fakes, running (handshake done unless pings go unanswered, configured
    unless `configure` is off); stopped on exit. `records_buffer`: the records sink's queue
    (0: a push waits until the test reads it)."""
    log: list[tuple[str, object]] = []
    link = link or FakeCreditLink()
    returns, records = LogSink("return", log), LogSink("record", log, records_buffer)
    transport = FakeTransport()
    dataset = FakeDataset(conversations or DEFAULT_CONVERSATIONS)
    hellos: list[WorkerConnected] = []

    async def probe(hello: WorkerConnected) -> bool:
        hellos.append(hello)
        return True

    worker = Worker(settings=settings or WorkerSettings(worker_id="w0", group_id="g0"),
                    endpoint=target or endpoint(), model="m", credits=link, returns=returns, records=records,
                    transport=transport, probe=probe, open_dataset=lambda _dir: dataset)
    harness = Harness(worker, link, returns, records, transport, dataset, log, hellos)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(worker.run)
            if configure:
                assert await worker.handle(ProfileConfigure(request_id="c", dataset_dir="/x")) is None
            if link.answer_pings:
                with anyio.fail_after(10):
                    await worker.connected.wait()
            yield harness
            tg.cancel_scope.cancel()
    finally:
        for closable in (link, returns, records):
            closable.close()
