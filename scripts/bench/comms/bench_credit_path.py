"""The credit path through our comms wrappers vs raw pyzmq: throughput and round-trip latency.

A "timing manager" (this process) binds a ROUTER (credits) and a PULL (credit returns) on IPC.
A "worker" (a spawned process) connects a DEALER (identity ``w0``) and a PUSH (IMMEDIATE=1),
answers every `Credit` with a `CreditReturn` on the PUSH, and exits on `CancelCredits`.

    (a) throughput: `--credits` credits with `--window` in flight, credits/s
    (b) latency: `--samples` round trips with one credit in flight, p50/p99 in microseconds

Both loops run once per variant: ``ours`` (RouterSocket/DealerSocket/PushSocket/PullSocket),
``curve`` (the same wrappers in a context secured with a fresh CURVE key pair and its ZAP
handler, as every run in Kubernetes) and ``raw`` (zmq.asyncio sockets with the same options,
the same msgspec encode/decode of the same messages, the same transport and process layout).
Variants rotate over `--repeats` rounds; the table shows the median of the rounds and the
ratios ours/raw and curve/ours (the cost of CURVE). `--transport tcp` runs over 127.0.0.1
(what crosses pods in a cluster) instead of IPC.

    PYTHONPATH=libs/messages:libs/comms .venv/bin/python scripts/bench/comms/bench_credit_path.py \
        [--credits 20000] [--window 64] [--samples 2000] [--repeats 3] [--transport ipc|tcp]
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import msgspec
import zmq
import zmq.asyncio

from aiperf.comms import CurveKeys, DealerSocket, PullSocket, PushSocket, RouterSocket, zmq_context
from aiperf.comms.sockets import DEFAULT_HWM
from aiperf.messages import (
    CancelCredits,
    Credit,
    CreditChannel,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    Phase,
    TimePing,
    WorkerConnected,
)

WORKER = "w0"
VARIANTS = ("ours", "curve", "raw")

SendCredit = Callable[[Credit], Awaitable[None]]
RecvReturn = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Endpoints:
    credits: str
    returns: str

    @classmethod
    def under(cls, ipc_dir: str) -> Endpoints:
        return cls(credits=f"ipc://{ipc_dir}/credits.ipc", returns=f"ipc://{ipc_dir}/returns.ipc")

    @classmethod
    def loopback(cls) -> Endpoints:
        return cls(credits=f"tcp://127.0.0.1:{_free_port()}", returns=f"tcp://127.0.0.1:{_free_port()}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class Result:
    variant: str
    throughput: float  # credits/s
    p50_us: float
    p99_us: float


def _credit(num: int) -> Credit:
    return Credit(phase=Phase.PROFILING, num=num, conversation_id="c", issued_at_ns=num)


# --- worker process -------------------------------------------------------------------------


async def _worker_ours(ep: Endpoints, keys: CurveKeys | None = None) -> None:
    with zmq_context(keys, linger_ms=1_000) as ctx:
        async with (DealerSocket[CreditChannel](ctx, identity=WORKER, decode=CreditChannel,
                                                channel="credits", connect=[ep.credits]) as dealer,
                    PushSocket(ctx, channel="credit_returns", connect=[ep.returns],
                               immediate=True) as push):
            await dealer.send(TimePing(worker_id=WORKER, seq=0, sent_at_ns=0))
            await push.send(WorkerConnected(worker_id=WORKER))
            while True:
                msg = await dealer.recv()
                if isinstance(msg, Credit):
                    await push.send(CreditReturn.of(msg, worker_id=WORKER))
                elif isinstance(msg, CancelCredits):
                    return


async def _worker_raw(ep: Endpoints) -> None:
    ctx = zmq.asyncio.Context()
    dealer, push = ctx.socket(zmq.DEALER), ctx.socket(zmq.PUSH)
    try:
        for option, value in ((zmq.IDENTITY, WORKER.encode()), (zmq.SNDHWM, DEFAULT_HWM),
                              (zmq.RCVHWM, DEFAULT_HWM), (zmq.LINGER, 0)):
            dealer.setsockopt(option, value)
        for option, value in ((zmq.SNDHWM, DEFAULT_HWM), (zmq.IMMEDIATE, 1), (zmq.LINGER, 5_000)):
            push.setsockopt(option, value)
        dealer.connect(ep.credits)
        push.connect(ep.returns)
        encoder = msgspec.msgpack.Encoder()
        credit_decoder = msgspec.msgpack.Decoder(CreditChannel)
        await dealer.send(encoder.encode(TimePing(worker_id=WORKER, seq=0, sent_at_ns=0)))
        await push.send(encoder.encode(WorkerConnected(worker_id=WORKER)))
        while True:
            msg = credit_decoder.decode(await dealer.recv())
            if isinstance(msg, Credit):
                await push.send(encoder.encode(CreditReturn.of(msg, worker_id=WORKER)))
            elif isinstance(msg, CancelCredits):
                return
    finally:
        dealer.close()
        push.close()
        ctx.term()


def _worker_main(variant: str, ep: Endpoints, keys: CurveKeys | None) -> None:
    if variant == "raw":
        anyio.run(_worker_raw, ep)
    else:
        anyio.run(_worker_ours, ep, keys)


# --- timing manager (this process) ----------------------------------------------------------


async def _measure(send: SendCredit, recv: RecvReturn, *, credits: int, window: int,
                   samples: int, warmup: int) -> tuple[float, float, float]:
    """(credits/s with `window` in flight, p50 us, p99 us with one in flight)."""

    async def windowed(total: int) -> float:
        start = time.perf_counter()
        issued = 0
        while issued < min(window, total):
            await send(_credit(issued))
            issued += 1
        for _ in range(total):
            await recv()
            if issued < total:
                await send(_credit(issued))
                issued += 1
        return total / (time.perf_counter() - start)

    await windowed(warmup)
    throughput = await windowed(credits)
    rtts: list[int] = []
    for num in range(samples):
        t0 = time.perf_counter_ns()
        await send(_credit(num))
        await recv()
        rtts.append(time.perf_counter_ns() - t0)
    rtts.sort()
    return throughput, rtts[len(rtts) // 2] / 1e3, rtts[min(len(rtts) - 1, len(rtts) * 99 // 100)] / 1e3


async def _manager_ours(ep: Endpoints, worker: mp.process.BaseProcess, keys: CurveKeys | None = None,
                        **loops: int) -> tuple[float, float, float]:
    with zmq_context(keys) as ctx:
        async with (RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits",
                                           bind=[ep.credits]) as router,
                    PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel,
                                                    channel="credit_returns",
                                                    bind=[ep.returns]) as pull):
            worker.start()
            with anyio.fail_after(30):
                peer, _ping = await router.recv()  # the DEALER is connected
                assert isinstance(await pull.recv(), WorkerConnected)
            result = await _measure(functools.partial(router.send, peer), pull.recv, **loops)
            await router.send(peer, CancelCredits(phase=Phase.PROFILING))
            return result


async def _manager_raw(ep: Endpoints, worker: mp.process.BaseProcess,
                       **loops: int) -> tuple[float, float, float]:
    ctx = zmq.asyncio.Context()
    router, pull = ctx.socket(zmq.ROUTER), ctx.socket(zmq.PULL)
    try:
        for option, value in ((zmq.ROUTER_MANDATORY, 1), (zmq.SNDHWM, DEFAULT_HWM),
                              (zmq.RCVHWM, DEFAULT_HWM), (zmq.LINGER, 0)):
            router.setsockopt(option, value)
        for option, value in ((zmq.RCVHWM, DEFAULT_HWM), (zmq.LINGER, 0)):
            pull.setsockopt(option, value)
        router.bind(ep.credits)
        pull.bind(ep.returns)
        encoder = msgspec.msgpack.Encoder()
        upstream_decoder = msgspec.msgpack.Decoder(CreditUpstream)
        returns_decoder = msgspec.msgpack.Decoder(CreditReturnChannel)
        worker.start()
        with anyio.fail_after(30):
            peer, payload = await router.recv_multipart()
            upstream_decoder.decode(payload)
            assert isinstance(returns_decoder.decode(await pull.recv()), WorkerConnected)

        async def send(credit: Credit) -> None:
            await router.send_multipart((peer, encoder.encode(credit)))

        async def recv() -> object:
            return returns_decoder.decode(await pull.recv())

        result = await _measure(send, recv, **loops)
        await router.send_multipart((peer, encoder.encode(CancelCredits(phase=Phase.PROFILING))))
        return result
    finally:
        router.close()
        pull.close()
        ctx.term()


def run_variant(variant: str, *, credits: int, window: int, samples: int, warmup: int,
                transport: str = "ipc") -> Result:
    """One round of both loops for `variant`, with a fresh worker process, IPC directory and
    (for ``curve``) key pair."""
    ipc_dir = tempfile.mkdtemp(prefix="aibench-", dir="/tmp")
    ep = Endpoints.under(ipc_dir) if transport == "ipc" else Endpoints.loopback()
    keys = CurveKeys.generate() if variant == "curve" else None
    worker = mp.get_context("spawn").Process(target=_worker_main, args=(variant, ep, keys))
    loops = {"credits": credits, "window": window, "samples": samples, "warmup": warmup}
    try:
        if variant == "raw":
            run = functools.partial(_manager_raw, ep, worker, **loops)
        else:
            run = functools.partial(_manager_ours, ep, worker, keys, **loops)
        throughput, p50, p99 = anyio.run(run)
        worker.join(timeout=30)
        if worker.exitcode != 0:
            raise RuntimeError(f"{variant} worker exited with {worker.exitcode}")
        return Result(variant, throughput, p50, p99)
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()
        shutil.rmtree(ipc_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--credits", type=int, default=20_000, help="credits of the throughput loop")
    parser.add_argument("--window", type=int, default=64, help="credits in flight (throughput)")
    parser.add_argument("--samples", type=int, default=2_000, help="round trips (latency loop)")
    parser.add_argument("--warmup", type=int, default=1_000, help="credits before measuring")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per variant (median shown)")
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc",
                        help="ipc (same pod) or tcp on 127.0.0.1 (across pods)")
    args = parser.parse_args()

    rounds: dict[str, list[Result]] = {v: [] for v in VARIANTS}
    for i in range(args.repeats):
        for variant in VARIANTS[i % len(VARIANTS):] + VARIANTS[:i % len(VARIANTS)]:
            rounds[variant].append(run_variant(variant, credits=args.credits, window=args.window,
                                               samples=args.samples, warmup=args.warmup,
                                               transport=args.transport))
    median = {v: Result(v, statistics.median(r.throughput for r in rs),
                        statistics.median(r.p50_us for r in rs),
                        statistics.median(r.p99_us for r in rs)) for v, rs in rounds.items()}

    print(f"credit path over {args.transport}: {args.credits} credits, window {args.window}; "
          f"{args.samples} round trips at 1 in flight; median of {args.repeats} rounds")
    print(f"{'variant':<10}{'credits/s':>12}{'p50 us':>10}{'p99 us':>10}   rounds (credits/s)")
    for v in VARIANTS:
        r = median[v]
        each = " ".join(f"{x.throughput:,.0f}" for x in rounds[v])
        print(f"{v:<10}{r.throughput:>12,.0f}{r.p50_us:>10.1f}{r.p99_us:>10.1f}   {each}")
    ours, raw, curve = median["ours"], median["raw"], median["curve"]
    for label, a, b in (("ours/raw", ours, raw), ("curve/ours", curve, ours)):
        print(f"{label:<10}{a.throughput / b.throughput:>12.2f}"
              f"{a.p50_us / b.p50_us:>10.2f}{a.p99_us / b.p99_us:>10.2f}")


if __name__ == "__main__":
    main()
