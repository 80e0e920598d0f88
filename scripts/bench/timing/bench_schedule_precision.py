"""Send-time precision of the timing-manager's pacer on a fixed schedule.

The real TimingManager (this process, uvloop, real sockets over IPC, wired by
`aiperf.timing_manager.main.build`) runs a fixed schedule of `--credits` credits at
`--rate` per second. A worker process (DEALER + PUSH) receives each credit, waits locally
until `scheduled_at_ns` (sleep to ~1 ms before, then yield-spin), "sends" and returns it.

Printed, in microseconds (p50 / p99 / max):
  tm issue error  : issued_at_ns - (scheduled_at_ns - send_ahead)  (how late the TM pacer is)
  worker margin   : scheduled_at_ns - arrival at the worker        (negative = arrived late)
  send offset err : worker send time - scheduled_at_ns             (what the e2e test measures)

    PYTHONPATH=$(ls -d libs/* services/* | tr '\\n' ':') .venv/bin/python \\
        scripts/bench/timing/bench_schedule_precision.py [--credits 500] [--rate 200]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import zmq.asyncio

from aiperf.comms import Addressing, Channel, DealerSocket, PushSocket
from aiperf.config import Benchmark, CommsOptions, FileDataset, FixedSchedulePhase, RunConfig, RuntimeOptions
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.store import write_dataset
from aiperf.messages import (
    Credit,
    CreditChannel,
    CreditReturn,
    Phase,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    ServiceType,
    TimePing,
    WorkerConnected,
)
from aiperf.runtime.service import ServiceContext
from aiperf.timing_manager.main import build


async def _precise_wait(target_ns: int, spin_ns: int) -> None:
    delay = target_ns - time.perf_counter_ns() - spin_ns
    if delay > 0:
        await anyio.sleep(delay / 1e9)
    while time.perf_counter_ns() < target_ns:
        await anyio.sleep(0)


def _worker(ipc_dir: str, total: int, spin_ns: int, out: Any) -> None:
    async def main() -> None:
        addressing = Addressing(ipc_dir=ipc_dir)
        ctx = zmq.asyncio.Context()
        margins, errors = [], []
        try:
            async with (DealerSocket[CreditChannel](ctx, identity="w0", decode=CreditChannel, channel="credits",
                                                    connect=[addressing.connect_endpoint(Channel.CREDITS)]) as dealer,
                        PushSocket(ctx, channel="credit_returns", immediate=True,
                                   connect=[addressing.connect_endpoint(Channel.CREDIT_RETURNS)]) as push):
                await dealer.send(TimePing(worker_id="w0", seq=0, sent_at_ns=time.perf_counter_ns()))
                await dealer.recv()
                await push.send(WorkerConnected(worker_id="w0"))
                async with anyio.create_task_group() as tg:
                    for _ in range(total):
                        credit = await dealer.recv()
                        assert isinstance(credit, Credit)
                        margins.append(credit.scheduled_at_ns - time.perf_counter_ns())

                        async def send(credit: Credit = credit) -> None:
                            await _precise_wait(credit.scheduled_at_ns, spin_ns)
                            errors.append(time.perf_counter_ns() - credit.scheduled_at_ns)
                            await push.send(CreditReturn.of(credit, worker_id="w0"))

                        tg.start_soon(send)
        finally:
            ctx.destroy(linger=1000)
        out.put((margins, errors))

    anyio.run(main, backend_options={"use_uvloop": True})


def _stats(values: list[int]) -> str:
    s = sorted(values)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] / 1000  # noqa: E731
    return f"{pick(0.5):9.1f} / {pick(0.99):9.1f} / {s[-1] / 1000:9.1f}"


async def _run(ipc_dir: str, credits: int, rate: float, spin_ns: int, tick_ns: int) -> None:
    dataset = Path(ipc_dir) / "dataset"
    write_dataset(dataset, [Conversation(id=f"c{i}", turns=[Turn(text="x", input_tokens=1,
                                                                timestamp_ms=1000 + i * 1000 / rate)])
                            for i in range(credits)])
    config = RunConfig(run_id="bench", mode="profile", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       runtime=RuntimeOptions(registration_timeout_s=20),
                       benchmark=Benchmark(models=["m"], datasets=[FileDataset(path="trace.jsonl")],
                                           phases=[FixedSchedulePhase()]))
    out: Any = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(target=_worker, args=(ipc_dir, credits, spin_ns, out))
    ctx = zmq.asyncio.Context()
    issued: list[int] = []
    try:
        async with AsyncExitStack() as stack:
            tm = await build(ServiceContext(config=config, service_type=ServiceType.TIMING_MANAGER,
                                            service_id="timing-manager", group_id="", zmq=ctx,
                                            addressing=Addressing(ipc_dir=ipc_dir)), stack)
            tm._tick_ns = tick_ns
            real_send = tm._credits.send

            async def spy(peer: bytes, message: object) -> None:
                if isinstance(message, Credit):
                    issued.append(message.issued_at_ns - (message.scheduled_at_ns - tm._send_ahead_ns))
                await real_send(peer, message)

            tm._credits.send = spy
            async with anyio.create_task_group() as tg:
                await tg.start(tm.run)
                proc.start()
                await tm.handle(ProfileConfigure(request_id="c", dataset_dir=str(dataset)))
                result = await tm.handle(ProfileStart(request_id="s"))
                tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    margins, errors = await anyio.to_thread.run_sync(out.get)
    proc.join()
    assert isinstance(result, ProfileFinished)
    phase = result.accounting.phases[Phase.PROFILING]
    print(f"fixed schedule: {credits} credits at {rate:g}/s, issued {phase.issued}, ok {phase.ok}")
    print("                     p50 us /    p99 us /    max us")
    print(f"tm issue error  : {_stats(issued)}")
    print(f"worker margin   : {_stats(margins)}   (late arrivals: {sum(m < 0 for m in margins)})")
    print(f"send offset err : {_stats(errors)}")
    late = [i for i, v in enumerate(issued) if v > 2_000_000]
    print(f"tm issue error > 2 ms at credits: {late[:20]}{' ...' if len(late) > 20 else ''} ({len(late)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--credits", type=int, default=500)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--spin-us", type=int, default=1000,
                        help="worker: sleep until this long before the time, then yield-spin")
    parser.add_argument("--tick-us", type=int, default=0,
                        help="TM pacer: longest single sleep (0: one sleep per credit, the default)")
    args = parser.parse_args()
    ipc_dir = tempfile.mkdtemp(prefix="tmb-", dir="/tmp")
    try:
        anyio.run(_run, ipc_dir, args.credits, args.rate, args.spin_us * 1000, args.tick_us * 1000, backend_options={"use_uvloop": True})
    finally:
        shutil.rmtree(ipc_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
