"""Real-network test kit: a tiny OpenAI-like HTTP server and a fake timing-manager + record
sink on real ZMQ sockets, driving a worker wired by `aiperf.worker.main.build`."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import orjson
import zmq.asyncio
from aiohttp import web

from aiperf.comms import Addressing, Channel, PullSocket, RouterSocket
from aiperf.config import Benchmark, CommsOptions, Endpoint, RunConfig, ServiceCounts
from aiperf.messages import (
    Credit,
    CreditChannel,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    Phase,
    ProfileConfigure,
    RawRecordChannel,
    RequestRecord,
    ServiceType,
    TimePing,
    TimePong,
    WorkerConnected,
)
from aiperf.runtime import ServiceContext
from aiperf.worker.main import build, raw_records_endpoint
from aiperf.worker.service import Worker

CHUNK_DELAY_S = 0.005
PIECES = ("Hel", "lo", " there")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class LlmServer:
    """POST /v1/chat/completions on 127.0.0.1, behaving by the last user message:
    "stream" (SSE pieces `CHUNK_DELAY_S` apart, or one JSON body when not streaming),
    "error500", "drop" (closes the connection after the first event), "hang" (answers only
    when the server stops)."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.hanging = anyio.Event()
        self._release = anyio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        self.url = ""

    async def __aenter__(self) -> LlmServer:
        await self._runner.setup()
        port = free_port()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        await self._runner.cleanup()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append((dict(request.headers), body))
        mode = body["messages"][-1]["content"]
        if mode == "error500":
            return web.json_response({"error": {"message": "boom", "type": "server_error"}}, status=500)
        if mode == "hang":
            self.hanging.set()
            await self._release.wait()
            return web.Response(text="too late")
        if not body.get("stream"):
            return web.json_response({"choices": [{"message": {"content": "".join(PIECES)}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in PIECES:
            await resp.write(_sse({"choices": [{"delta": {"content": piece}}]}))
            if mode == "drop":
                assert request.transport is not None
                request.transport.abort()
                return resp
            await anyio.sleep(CHUNK_DELAY_S)
        await resp.write(_sse({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 3}}))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


@dataclass
class FakeTimingManager:
    """ROUTER on `credits` + PULL on `credit_returns` (the timing-manager's side), and the
    record-processor's PULL on `raw_records`."""

    router: RouterSocket[TimePing]
    returns: PullSocket[CreditReturnChannel]
    records: PullSocket[RequestRecord]
    worker: Worker
    worker_scope: anyio.CancelScope
    worker_done: anyio.Event
    peer: bytes = b""

    async def stop_worker(self) -> None:
        """Stop the worker as `run_service` does (cancel its `run`) and wait for it."""
        self.worker_scope.cancel()
        with anyio.fail_after(10):
            await self.worker_done.wait()

    async def credit(self, num: int, conversation: str, *, phase: Phase = Phase.PROFILING,
                     **kw: Any) -> Credit:
        c = Credit(phase=phase, num=num, conversation_id=conversation,
                   issued_at_ns=time.perf_counter_ns(), **kw)
        await self.router.send(self.peer, c)
        return c

    async def send(self, message: CreditChannel) -> None:
        await self.router.send(self.peer, message)

    async def next_return(self) -> CreditReturn:
        with anyio.fail_after(10):
            msg = await self.returns.recv()
        assert isinstance(msg, CreditReturn), msg
        return msg

    async def next_record(self) -> RequestRecord:
        with anyio.fail_after(10):
            return await self.records.recv()

    async def exchange(self, credits: list[tuple[int, str, dict[str, Any]]]) -> dict[int, tuple[RequestRecord, CreditReturn]]:
        """Send the credits; each return must come after its record was pushed."""
        for num, conversation, kw in credits:
            await self.credit(num, conversation, **kw)
        records: dict[int, RequestRecord] = {}
        returns: dict[int, CreditReturn] = {}
        while len(returns) < len(credits):
            ret = await self.next_return()
            assert ret.num not in returns
            returns[ret.num] = ret
            while ret.num not in records:  # pushed before its return: it must come
                rec = await self.next_record()
                assert rec.credit_num not in records
                records[rec.credit_num] = rec
        while len(records) < len(credits):
            rec = await self.next_record()
            records[rec.credit_num] = rec
        return {n: (records[n], returns[n]) for n in returns}


@asynccontextmanager
async def real_worker(zctx: zmq.asyncio.Context, ipc_dir: str, dataset_dir: str, *,
                      url: str, **endpoint: Any) -> AsyncIterator[FakeTimingManager]:
    """A worker built by `main.build` on real sockets (a streaming chat endpoint at `url`, with the
    `endpoint` fields given), connected and configured."""
    addressing = Addressing(ipc_dir=ipc_dir)
    target = Endpoint(**{"urls": [url], "streaming": True, **endpoint})
    config = RunConfig(run_id="t", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       services=ServiceCounts(record_processors_per_group=1),
                       benchmark=Benchmark(models=["m"], endpoint=target))
    ctx = ServiceContext(config=config, service_type=ServiceType.WORKER, service_id="worker-g0-0",
                         group_id="g0", zmq=zctx, addressing=addressing)
    async with (RouterSocket[TimePing](zctx, decode=CreditUpstream, channel="credits",
                                       bind=addressing.bind_endpoints(Channel.CREDITS)) as router,
                PullSocket[CreditReturnChannel](zctx, decode=CreditReturnChannel, channel="credit_returns",
                                                bind=addressing.bind_endpoints(Channel.CREDIT_RETURNS)) as returns,
                PullSocket[RequestRecord](zctx, decode=RawRecordChannel, channel="raw_records",
                                          bind=[raw_records_endpoint(addressing, "g0", 0)]) as records,
                AsyncExitStack() as stack):
        worker = await build(ctx, stack)
        assert isinstance(worker, Worker)
        tm = FakeTimingManager(router, returns, records, worker, anyio.CancelScope(), anyio.Event())

        async def run_worker(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with tm.worker_scope:
                await worker.run(task_status=task_status)
            tm.worker_done.set()

        async with anyio.create_task_group() as tg:
            await tg.start(run_worker)
            with anyio.fail_after(10):
                tm.peer, ping = await router.recv()
                assert isinstance(ping, TimePing) and tm.peer == b"worker-g0-0"
                await router.send(tm.peer, TimePong(seq=ping.seq, ping_sent_at_ns=ping.sent_at_ns,
                                                    received_at_ns=time.perf_counter_ns()))
                hello = await returns.recv()
                assert hello == WorkerConnected(worker_id="worker-g0-0", group_id="g0")
                await worker.handle(ProfileConfigure(request_id="c", dataset_dir=dataset_dir))
            yield tm
            tm.worker_scope.cancel()
