"""Controller capacity (issue 13, item 8): how many requests/s one controller pod's
timing-manager and records-manager carry, beside raw pyzmq measured in the same run.

    python scripts/bench/controller.py [--workers 100] [--requests 40000] [--concurrency 1000] \
        [--processors 4] [--batch 32] [--transport ipc|tcp] [--only timing|records]

(the repo's source roots on PYTHONPATH, as for the other benchmarks.)

1. timing-manager: the real `TimingManager` (its phase loop, ledger, least-loaded worker pool)
   on our `RouterSocket`/`PullSocket`, one closed-loop phase of `--requests` credits with
   `--concurrency` in flight, to `--workers` simulated workers. The workers live in one other
   process: a DEALER per worker (identity = worker id) and a PUSH, speaking the real codecs
   (`WorkerConnected`, then a `CreditReturn` for every `Credit`, at once). Figure: credits/s
   from `ProfileStart` to the last return.
2. records-manager: the real `RecordsManager` (aggregation with exact percentiles, and
   `profile_export.jsonl` written as records arrive) on our `PullSocket`, fed by `--processors`
   simulated record-processors (other processes, PUSH) each pushing its share of `--requests`
   realistic `MetricRecord`s (a streamed 64-token answer: 63 inter-chunk latencies) in
   `MetricRecordBatch`es of `--batch` records, as a saturated record-processor sends them (its
   batches fill before their 5 ms are up; `--batch 1`: one record per message, the cost
   before batching). Figure: records/s from the first to the last record taken.
3. raw: the same two message flows with bare zmq.asyncio sockets and msgspec in this process
   and the same peers (credits: send a credit to the least-recently-used worker, receive its
   return; records: receive and decode the same batches), the ceiling of this transport in
   Python.

The peers run in other processes, so on a 2-core machine the controller side has one core.
Target: >= 20,000 requests/s through one controller (100 worker pods x 200 requests/s).
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import msgspec
import zmq
import zmq.asyncio

from aiperf.comms import PullSocket, RouterSocket, zmq_context
from aiperf.config import Benchmark, ConcurrencyPhase
from aiperf.messages import (
    Credit,
    CreditChannel,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    MetricRecord,
    MetricRecordBatch,
    Phase,
    ProfileConfigure,
    TimePing,
    WorkerConnected,
)
from aiperf.record_processor.batching import MAX_RECORDS
from aiperf.runtime import configure_logging
from aiperf.issuing.ports import TurnTiming

TOKENS = 64


def endpoint(transport: str, folder: str, name: str) -> str:
    if transport == "ipc":
        return f"ipc://{folder}/{name}.ipc"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


# -- simulated peers (other processes) -------------------------------------------------------

def fake_workers(credits_ep: str, returns_ep: str, workers: int, ready: mp.synchronize.Event) -> None:
    """`workers` DEALERs (identity worker-i) and one PUSH: announce each worker, then answer every
    Credit with its CreditReturn at once, until a credit with num -1 arrives."""
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.IMMEDIATE, 1)
    push.connect(returns_ep)
    dealers = []
    for i in range(workers):
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.IDENTITY, f"worker-{i}".encode())
        d.connect(credits_ep)
        dealers.append(d)
    enc = msgspec.msgpack.Encoder()
    dec = msgspec.msgpack.Decoder(CreditChannel)
    time.sleep(0.3)  # let the connections settle before the controller counts us
    for i in range(workers):
        push.send(enc.encode(WorkerConnected(worker_id=f"worker-{i}")))
    ready.set()
    poller = zmq.Poller()
    for d in dealers:
        poller.register(d, zmq.POLLIN)
    names = {d: d.getsockopt(zmq.IDENTITY).decode() for d in dealers}
    while True:
        for sock, _ in poller.poll():
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                msg = dec.decode(frames[-1])
                if isinstance(msg, Credit):
                    if msg.num < 0:
                        ctx.destroy(linger=0)
                        return
                    push.send(enc.encode(CreditReturn.of(msg, worker_id=names[sock])))


def sample_record(num: int) -> MetricRecord:
    """A MetricRecord as a record-processor sends it for a streamed 64-token answer."""
    icl = [1_000_000.0 + (i * 7919 + num) % 50_000 for i in range(TOKENS - 1)]
    metrics: dict[str, float | list[float]] = {
        "request_latency": 90_000_000.0 + num % 1000, "time_to_first_token": 25_000_000.0 + num % 777,
        "time_to_second_token": 1_000_000.0, "time_to_first_output_token": 25_000_000.0,
        "decode_duration": 65_000_000.0, "inter_chunk_latency": icl, "inter_token_latency": 1_030_000.0,
        "input_sequence_length": 128.0, "output_token_count": float(TOKENS),
        "output_sequence_length": float(TOKENS), "usage_prompt_tokens": 128.0,
        "usage_completion_tokens": float(TOKENS), "usage_total_tokens": 128.0 + TOKENS,
        "e2e_output_token_throughput": 700.0, "prefill_throughput_per_user": 5120.0,
        "output_token_throughput_per_user": 970.0,
    }
    now = time.time_ns()
    return MetricRecord(phase=Phase.PROFILING, credit_num=num, worker_id=f"worker-{num % 100}",
                        conversation_id=f"session_{num % 1000:06d}", start_wall_ns=now, end_wall_ns=now + 90_000_000,
                        metrics=metrics, processor_id="record-processor-g0-0",
                        metadata={"request_start_ns": now, "request_end_ns": now + 90_000_000,
                                  "credit_issued_ns": now, "x_request_id": f"{num:032x}"})


def fake_processor(records_ep: str, first: int, count: int, batch: int, go: mp.synchronize.Event) -> None:
    """Push `count` MetricRecords (numbers from `first`) in batches of `batch` as fast as the
    socket takes them."""
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(records_ep)
    enc = msgspec.msgpack.Encoder()
    records = [sample_record(first + i) for i in range(count)]
    frames = [enc.encode(MetricRecordBatch(records=records[i:i + batch])) for i in range(0, count, batch)]
    go.wait()
    for frame in frames:
        push.send(frame)
    push.close(linger=-1)
    ctx.term()


# -- the controller side ------------------------------------------------------------------

class _Conversations:
    """A dataset of `n` single-turn conversations (the timing-manager's port)."""

    def __init__(self, n: int) -> None:
        self._ids = [f"session_{i:06d}" for i in range(n)]

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[str]:
        return self._ids

    def timestamps(self) -> list[float | None]:
        return [None] * len(self._ids)

    def turns(self, index: int) -> Sequence[TurnTiming]:
        return (TurnTiming(None, None),)

    def close(self) -> None:
        pass


class _NoEvents:
    async def publish(self, event: object) -> None:
        pass


async def timing_manager_rate(args: argparse.Namespace, folder: str) -> float:
    from aiperf.issuing.engine import TimingManager

    credits_ep, returns_ep = endpoint(args.transport, folder, "credits"), endpoint(args.transport, folder, "returns")
    phase = ConcurrencyPhase(name="profiling", requests=args.requests, concurrency=args.concurrency)
    ready = mp.get_context("spawn").Event()
    with zmq_context() as ctx:
        async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits", bind=[credits_ep]) as credits, \
                PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel, channel="credit_returns",
                                                bind=[returns_ep]) as returns:
            tm = TimingManager(service_id="timing-manager", phases=[phase], seed=1, expected_workers=args.workers,
                               registration_timeout_s=60, credits=credits, returns=returns, events=_NoEvents(),
                               open_conversations=lambda _: _Conversations(1000), audit_interval_s=None)
            peer = mp.get_context("spawn").Process(target=fake_workers,
                                                   args=(credits_ep, returns_ep, args.workers, ready))
            peer.start()
            async with anyio.create_task_group() as tg:
                await tg.start(tm.run)
                await tm.configure("unused")
                t0, c0 = time.perf_counter(), time.process_time()
                accounting = await tm.start()
                elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
                tg.cancel_scope.cancel()
            done = accounting.phases[Phase.PROFILING]
            assert done.issued == args.requests, done
            await credits.send(b"worker-0", Credit(phase=Phase.PROFILING, num=-1, conversation_id="", issued_at_ns=0))
            await anyio.to_thread.run_sync(peer.join, 10)
    return args.requests / elapsed, args.requests / cpu


async def raw_credit_rate(args: argparse.Namespace, folder: str) -> float:
    """Bare zmq.asyncio: keep `--concurrency` credits out, least-recently-used worker first."""
    credits_ep, returns_ep = endpoint(args.transport, folder, "rcredits"), endpoint(args.transport, folder, "rreturns")
    ctx = zmq.asyncio.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.bind(credits_ep)
    pull = ctx.socket(zmq.PULL)
    pull.bind(returns_ep)
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(CreditReturnChannel)
    ready = mp.get_context("spawn").Event()
    peer = mp.get_context("spawn").Process(target=fake_workers, args=(credits_ep, returns_ep, args.workers, ready))
    peer.start()
    idle: collections.deque[bytes] = collections.deque()
    while len(idle) < args.workers:
        msg = dec.decode(await pull.recv())
        if isinstance(msg, WorkerConnected):
            idle.append(msg.worker_id.encode())
    await anyio.sleep(0.2)
    sent = done = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while done < args.requests:
        while sent < args.requests and sent - done < args.concurrency:
            worker = idle.popleft()
            idle.append(worker)
            await router.send_multipart([worker, enc.encode(Credit(
                phase=Phase.PROFILING, num=sent, conversation_id="session_000000",
                issued_at_ns=time.perf_counter_ns()))])
            sent += 1
        msg = dec.decode(await pull.recv())
        if isinstance(msg, CreditReturn):
            done += 1
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    await router.send_multipart([b"worker-0", enc.encode(Credit(phase=Phase.PROFILING, num=-1,
                                                                 conversation_id="", issued_at_ns=0))])
    await anyio.to_thread.run_sync(peer.join, 10)
    ctx.destroy(linger=0)
    return args.requests / elapsed, args.requests / cpu


class _Counting:
    """Wraps the records PULL: counts records handed to the records-manager."""

    def __init__(self, inner: PullSocket[MetricRecordBatch], total: int) -> None:
        self._inner, self._total = inner, total
        self.count = 0
        self.first = self.first_cpu = 0.0
        self.all_taken = anyio.Event()

    async def recv(self) -> MetricRecordBatch:
        if self.count == self._total:  # the previous batch held the last record, and it was taken
            self.all_taken.set()
        batch = await self._inner.recv()
        if self.count == 0:
            self.first, self.first_cpu = time.perf_counter(), time.process_time()
        self.count += len(batch.records)
        return batch


def _start_processors(args: argparse.Namespace, records_ep: str) -> tuple[list[mp.Process], mp.synchronize.Event]:
    go = mp.get_context("spawn").Event()
    share = args.requests // args.processors
    procs = [mp.get_context("spawn").Process(target=fake_processor, args=(records_ep, i * share, share, args.batch, go))
             for i in range(args.processors)]
    for p in procs:
        p.start()
    return procs, go


async def records_manager_rate(args: argparse.Namespace, folder: str) -> float:
    from aiperf.records_manager.service import RecordsManager

    records_ep = endpoint(args.transport, folder, "records")
    total = (args.requests // args.processors) * args.processors
    benchmark = Benchmark(models=["m"])
    with zmq_context() as ctx:
        async with PullSocket[MetricRecordBatch](ctx, decode=MetricRecordBatch, channel="records",
                                                 bind=[records_ep]) as pull:
            source = _Counting(pull, total)
            rm = RecordsManager(benchmark=benchmark, run_id="bench", t0_wall_ns=0, records=source, events=None,
                                artifact_dir=Path(folder) / "artifacts")
            procs, go = _start_processors(args, records_ep)
            async with anyio.create_task_group() as tg:
                await tg.start(rm.run)
                await rm.handle(ProfileConfigure(request_id="c", dataset_dir=""))
                await anyio.sleep(1.0)  # every processor connected and encoded its records
                go.set()
                await source.all_taken.wait()
                elapsed = time.perf_counter() - source.first
                cpu = time.process_time() - source.first_cpu
                tg.cancel_scope.cancel()
            for p in procs:
                await anyio.to_thread.run_sync(p.join, 10)
    return total / elapsed, total / cpu


async def raw_records_rate(args: argparse.Namespace, folder: str) -> float:
    records_ep = endpoint(args.transport, folder, "rrecords")
    total = (args.requests // args.processors) * args.processors
    ctx = zmq.asyncio.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(records_ep)
    dec = msgspec.msgpack.Decoder(MetricRecordBatch)
    procs, go = _start_processors(args, records_ep)
    await anyio.sleep(1.0)
    go.set()
    first = len(dec.decode(await pull.recv()).records)
    t0, c0 = time.perf_counter(), time.process_time()
    taken = first
    while taken < total:
        taken += len(dec.decode(await pull.recv()).records)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    for p in procs:
        await anyio.to_thread.run_sync(p.join, 10)
    ctx.destroy(linger=0)
    return (total - first) / elapsed, (total - first) / cpu


async def main_async(args: argparse.Namespace) -> None:
    configure_logging(service_id="bench", level="warning")
    folder = tempfile.mkdtemp(prefix="bench-controller-", dir="/tmp")
    try:
        parts = [("timing-manager credits", timing_manager_rate, raw_credit_rate),
                 ("records-manager records", records_manager_rate, raw_records_rate)]
        if args.only:
            parts = [p for p in parts if p[0].startswith(args.only)]
        rows = []
        for _ in range(args.repeats):
            row = []
            for _name, ours, raw in parts:
                row += [await ours(args, folder), await raw(args, folder)]
            rows.append(row)
        wall = [max(r[i][0] for r in rows) for i in range(2 * len(parts))]
        cpu = [max(r[i][1] for r in rows) for i in range(2 * len(parts))]
        print(f"controller capacity ({args.transport}, {args.workers} simulated workers, {args.requests:,} requests, "
              f"C={args.concurrency}, {args.processors} simulated record-processors, batches of {args.batch} records; "
              f"best of {args.repeats})")
        print("wall: requests/s achieved here; CPU: requests per CPU-second of the controller process, i.e. "
              "the rate one free core sustains (a busy host shrinks the first, hardly the second)")
        print("| path | ours wall/s | raw wall/s | ours CPU/s | raw CPU/s | ours/raw (CPU) | us CPU/request | 20,000/s |")
        print("|---|---|---|---|---|---|---|---|")
        for i, (name, _ours, _raw) in zip(range(0, 2 * len(parts), 2), parts, strict=True):
            verdict = "met" if cpu[i] >= 20000 else "MISSED"
            print(f"| {name} | {wall[i]:,.0f} | {wall[i + 1]:,.0f} | {cpu[i]:,.0f} | {cpu[i + 1]:,.0f} | "
                  f"{cpu[i] / cpu[i + 1]:.2f} | {1e6 / cpu[i]:.1f} | {verdict} |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--requests", type=int, default=40000)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--processors", type=int, default=4)
    parser.add_argument("--batch", type=int, default=MAX_RECORDS,
                        help=f"records per message on the records channel (default {MAX_RECORDS}, the record-processor's)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    parser.add_argument("--only", choices=("timing", "records"),
                        help="measure only the timing-manager or only the records-manager (and its raw reference)")
    anyio.run(main_async, parser.parse_args(), backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
