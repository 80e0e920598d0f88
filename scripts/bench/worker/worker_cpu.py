"""CPU cost per request of the worker hot path, against the bundled mock server.

Runs a worker wired by `aiperf.worker.main.build` (uvloop, real IPC sockets) in this process,
with a minimal fake timing-manager (raw ROUTER + PULL) and record sink (raw PULL, no decode),
as a closed loop of `--concurrency` credits. Prints CPU-ms per request of this process
(worker + the fakes, so an upper bound of the worker's own cost) and, separately, the CPU cost
of computing the metrics of the same records as a record-processor does (builtin tokenizer).

    PYTHONPATH=$(ls -d libs/* services/* mock | tr '\\n' ':') .venv/bin/python \
        scripts/bench/worker/worker_cpu.py --requests 1000 --concurrency 32

`AIPERF_HTTP_CLIENT=aiohttp` measures the previous HTTP client.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass

import anyio
import msgspec
import zmq
import zmq.asyncio

from aiperf.comms import Addressing, Channel
from aiperf.config import Benchmark, CommsOptions, Endpoint, RunConfig, ServiceCounts
from aiperf.dataset import Conversation, Turn, write_dataset
from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import (
    Credit,
    CreditReturn,
    CreditReturnChannel,
    Phase,
    ProfileConfigure,
    RequestRecord,
    ServiceType,
    TimePing,
    TimePong,
)
from aiperf.messages.load import ClientLoad
from aiperf.metrics import compute_metrics
from aiperf.mock_server.testing import MockProcess
from aiperf.runtime import ServiceContext
from aiperf.tokenizer import load_tokenizer
from aiperf.worker.main import build, raw_records_endpoint
from aiperf.worker.service import Worker


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class BenchRun:
    """What one measured closed loop gave: the raw records (msgpack), CPU and wall seconds of
    the measured part, and the worker's own load figures (`Worker.load()`)."""

    raw: list[bytes]
    cpu_s: float
    wall_s: float
    load: ClientLoad | None


async def bench(url: str, requests: int, concurrency: int, tokens: int, ipc_dir: str,
                data_dir: str) -> BenchRun:
    zctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=ipc_dir)
    benchmark = Benchmark(models=["m"], endpoint=Endpoint(urls=[url], streaming=True))
    config = RunConfig(run_id="b", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       services=ServiceCounts(), benchmark=benchmark)
    ctx = ServiceContext(config=config, service_type=ServiceType.WORKER, service_id="w",
                         group_id="g0", zmq=zctx, addressing=addressing)
    enc = msgspec.msgpack.Encoder()
    ping_dec = msgspec.msgpack.Decoder(TimePing)
    ret_dec = msgspec.msgpack.Decoder(CreditReturnChannel)
    router, pull, sink = zctx.socket(zmq.ROUTER), zctx.socket(zmq.PULL), zctx.socket(zmq.PULL)
    router.bind(addressing.ipc(Channel.CREDITS))
    pull.bind(addressing.ipc(Channel.CREDIT_RETURNS))
    sink.bind(raw_records_endpoint(addressing, "g0", 0))
    raw: list[bytes] = []
    result = BenchRun(raw, 0.0, 0.0, None)
    try:
        async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
            worker = await build(ctx, stack)
            assert isinstance(worker, Worker)
            await tg.start(worker.run)
            peer, frame = await router.recv_multipart()
            ping = ping_dec.decode(frame)
            await router.send_multipart((peer, enc.encode(TimePong(seq=ping.seq, ping_sent_at_ns=ping.sent_at_ns,
                                                                   received_at_ns=time.perf_counter_ns()))))
            await pull.recv()  # WorkerConnected
            await worker.handle(ProfileConfigure(request_id="c", dataset_dir=data_dir))

            async def drain_sink() -> None:
                while True:
                    raw.append(await sink.recv())

            tg.start_soon(drain_sink)

            async def run_loop(total: int, first: int) -> None:
                sent = 0
                for _ in range(min(concurrency, total)):
                    c = Credit(phase=Phase.PROFILING, num=first + sent, conversation_id=f"c{sent % 64}",
                               issued_at_ns=time.perf_counter_ns())
                    await router.send_multipart((peer, enc.encode(c)))
                    sent += 1
                done = 0
                while done < total:
                    msg = ret_dec.decode(await pull.recv())
                    assert isinstance(msg, CreditReturn) and msg.ok, msg
                    done += 1
                    if sent < total:
                        c = Credit(phase=Phase.PROFILING, num=first + sent, conversation_id=f"c{sent % 64}",
                                   issued_at_ns=time.perf_counter_ns())
                        await router.send_multipart((peer, enc.encode(c)))
                        sent += 1

            await run_loop(concurrency * 2, 0)  # warm up connections
            raw.clear()
            c0, w0 = cpu_s(), time.perf_counter()
            await run_loop(requests, 10_000)
            c1, w1 = cpu_s(), time.perf_counter()
            result = BenchRun(raw, c1 - c0, w1 - w0, worker.load())
            tg.cancel_scope.cancel()
    finally:
        for s in (router, pull, sink):
            s.close(linger=0)
        zctx.destroy(linger=0)
    return result


def start_mock(ttft_ms: str, itl_ms: str, tokens: int, *flags: str) -> MockProcess:
    return MockProcess("--ttft-ms", ttft_ms, "--itl-ms", itl_ms, "--output-tokens", str(tokens), *flags).start()


def make_dataset(data_dir: str, tokens: int) -> None:
    write_dataset(data_dir, [Conversation(id=f"c{i}", turns=[Turn(text="hello world " * 50, input_tokens=100,
                                                                  max_tokens=tokens)]) for i in range(64)])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--ttft-ms", default="40")
    p.add_argument("--itl-ms", default="8")
    args = p.parse_args()
    ipc_dir = tempfile.mkdtemp(prefix="aib-", dir="/tmp")
    data_dir = tempfile.mkdtemp(prefix="aibd-")
    make_dataset(data_dir, args.tokens)
    server = start_mock(args.ttft_ms, args.itl_ms, args.tokens)
    try:
        run = anyio.run(bench, server.url, args.requests, args.concurrency, args.tokens, ipc_dir, data_dir,
                        backend_options={"use_uvloop": True})
    finally:
        server.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    raw = run.raw
    print(f"worker: {args.requests} streamed requests of {args.tokens} tokens, concurrency {args.concurrency}: "
          f"{run.cpu_s * 1e3 / args.requests:.3f} CPU-ms/request (process incl. fakes), "
          f"{args.requests / run.wall_s:.0f} req/s")
    dec = msgspec.msgpack.Decoder(RequestRecord)
    tokenizer = load_tokenizer(None)
    records = [dec.decode(b) for b in raw]
    chunks = sum(len(r.chunks) for r in records) / max(len(records), 1)
    c0 = cpu_s()
    enc = msgspec.msgpack.Encoder()
    for b in raw:
        r = dec.decode(b)
        enc.encode(compute_metrics(r, parse_response(EndpointType.CHAT, True, r), count_tokens=tokenizer.count))
    c1 = cpu_s()
    print(f"record-processor: {(c1 - c0) * 1e3 / max(len(raw), 1):.3f} CPU-ms/record "
          f"(decode + parse + count + metrics + encode; {chunks:.1f} network reads/request)")


if __name__ == "__main__":
    main()
