"""1,000 worker pods through one controller (issue 24, item 4: the credit-issuing half): the
controller's cost when each pod issues its own credits from its slice of the plan.

    python scripts/bench/pods.py [--pods 1000] [--workers 1000] [--rate-per-pod 200] \
        [--seconds 10] [--processes 4] [--transport ipc|tcp]

(the repo's source roots on PYTHONPATH, as for `controller.py`.)

1. Registration of `--pods` simulated pods to the real `PodCoordinator` (a DEALER per pod,
   `PodHello`, real codecs) and, separately, of `--workers` simulated workers to the real
   `TimingManager` (a DEALER and a PUSH per worker: `TimePing`, its `TimePong`, then
   `WorkerConnected`, as a worker starts), and of `--workers` simulated workers to the real
   `ControlServer` of the system-controller (a DEALER per worker: `Register`, then
   `ServiceStatus` running, as `aiperf.runtime` does at start-up), followed by one command
   asked of all of them at once (`ProfileConfigure` through `ask_all`, each answered `Ack`),
   the fan-out a run's configure step makes. Figure: seconds from "go" (the peer processes
   create their sockets only then) until the controller counts them all. Target < 10 s.
2. One phase of `--rate-per-pod` x `--pods` requests/s for `--seconds` (a constant-rate phase
   with a request budget, cut by `slice_phase`): each simulated pod computes its counters from
   the time elapsed since its `PodPhaseStart` (no per-request Python work; a request takes 50
   ms, every 1,000th fails), reports them every second and its final total when its share is
   settled. Figures: the controller process's CPU seconds per pod report and per simulated
   request, the effective requests/s, and whether the totals are exact (the sums of the
   slices == the plan).
3. Reference, same run: the per-request `TimingManager` (credit out, return in) for a short
   closed-loop phase against 100 simulated workers (`controller.py`'s), in credits per CPU
   second of the controller; and the ratio of the two.

The peers run in `--processes` other processes; `process_time` of this process counts its
libzmq I/O threads too.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import multiprocessing.synchronize
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event
from pathlib import Path

import anyio
import msgspec
import zmq

from aiperf.comms import PullSocket, RouterSocket, zmq_context
from aiperf.config import ConstantPhase
from aiperf.issuing.coordinator import PodCoordinator
from aiperf.issuing.slices import decode_slice
from aiperf.messages import (
    Ack,
    CreditReturnChannel,
    CreditUpstream,
    PodCounts,
    PodDownstream,
    PodHello,
    PodPhaseStart,
    PodReport,
    PodUpstream,
    ProfileConfigure,
    Register,
    ServiceState,
    ServiceStatus,
    ServiceType,
    TimePing,
    TimePong,
    ToController,
    ToService,
    WorkerConnected,
)
from aiperf.runtime import configure_logging
from aiperf.runtime.control_server import ControlServer

sys.path.insert(0, str(Path(__file__).parent))
import controller  # noqa: E402  (the reference: controller.py's timing-manager measurement)
from controller import endpoint  # noqa: E402

LATENCY_S = 0.05
FAIL_EVERY = 1000
REPORT_EVERY_S = 1.0


# -- simulated pods (other processes) -----------------------------------------------------------

def pod_counts(requests: int, rate: float, elapsed: float) -> PodCounts:
    """A pod's counters `elapsed` s into its share: `requests` sent at `rate`, each done 50 ms
    later, every 1,000th failed."""
    issued = min(requests, int(rate * elapsed))
    done = min(requests, int(rate * max(0.0, elapsed - LATENCY_S)))
    failed = done // FAIL_EVERY
    return PodCounts(issued=issued, ok=done - failed, failed=failed, in_flight=issued - done, sent=done)


def fake_pods(pods_ep: str, first: int, count: int, ready: mp.synchronize.Semaphore, go: mp.synchronize.Event,
              stop: mp.synchronize.Event) -> None:
    """Pods `first`.. `first + count - 1`: on `go` a DEALER each and a `PodHello`; then per
    `PodPhaseStart` counters from the elapsed time, a report every second and a final total."""
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(PodDownstream)
    ready.release()
    go.wait()
    ctx = zmq.Context()
    dealers = []
    for i in range(first, first + count):
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.IDENTITY, f"pod-{i:04d}".encode())
        d.setsockopt(zmq.LINGER, 0)
        d.connect(pods_ep)
        d.send(enc.encode(PodHello(pod_id=f"pod-{i:04d}", workers=8)))
        dealers.append(d)
    poller = zmq.Poller()
    for d in dealers:
        poller.register(d, zmq.POLLIN)
    # per dealer: (phase index, t0, requests, rate, next report at, seq)
    running: dict[zmq.Socket[bytes], list[float]] = {}
    while not stop.is_set():
        for sock, _ in poller.poll(50):
            message = dec.decode(sock.recv())
            if isinstance(message, PodPhaseStart):
                piece = decode_slice(message.slice)
                now = time.monotonic()
                running[sock] = [message.phase_index, now, piece.requests or 0, piece.rate or 0.0,
                                 now + REPORT_EVERY_S, 0]
        now = time.monotonic()
        for sock, state in list(running.items()):
            index, t0, requests, rate, due, seq = state
            counts = pod_counts(int(requests), rate, now - t0)
            final = counts.ok + counts.failed == requests
            if final or now >= due:
                state[4], state[5] = due + REPORT_EVERY_S, seq + 1
                name = bytes(sock.getsockopt(zmq.IDENTITY)).decode()
                sock.send(enc.encode(PodReport(pod_id=name, phase_index=int(index), seq=int(seq) + 1,
                                               counts=counts, final=final)))
                if final:
                    del running[sock]
    ctx.destroy(linger=0)


def fake_workers(credits_ep: str, returns_ep: str, first: int, count: int, ready: mp.synchronize.Semaphore,
                 go: mp.synchronize.Event, stop: mp.synchronize.Event) -> None:
    """Workers `first`..: on `go` a DEALER (credits) and a PUSH (returns) each, a `TimePing`,
    and `WorkerConnected` once its `TimePong` came."""
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(TimePong)
    ready.release()
    go.wait()
    ctx = zmq.Context()
    dealers, pushes = {}, {}
    for i in range(first, first + count):
        name = f"worker-{i:04d}"
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.IDENTITY, name.encode())
        d.setsockopt(zmq.LINGER, 0)
        d.connect(credits_ep)
        p = ctx.socket(zmq.PUSH)
        p.setsockopt(zmq.LINGER, 1000)
        p.connect(returns_ep)
        d.send(enc.encode(TimePing(worker_id=name, seq=1, sent_at_ns=time.perf_counter_ns())))
        dealers[d], pushes[d] = name, p
    poller = zmq.Poller()
    for d in dealers:
        poller.register(d, zmq.POLLIN)
    waiting = set(dealers)
    while waiting and not stop.is_set():
        for sock, _ in poller.poll(50):
            dec.decode(sock.recv())
            if sock in waiting:
                waiting.discard(sock)
                pushes[sock].send(enc.encode(WorkerConnected(worker_id=dealers[sock])))
    stop.wait()
    ctx.destroy(linger=0)


def fake_services(control_ep: str, first: int, count: int, ready: mp.synchronize.Semaphore,
                  go: mp.synchronize.Event, stop: mp.synchronize.Event) -> None:
    """Workers `first`..: on `go` a DEALER each on the control channel, `Register` and
    `ServiceStatus` running; every command is answered `Ack`."""
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(ToService)
    ready.release()
    go.wait()
    ctx = zmq.Context()
    poller = zmq.Poller()
    for i in range(first, first + count):
        name = f"worker-{i:04d}"
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.IDENTITY, name.encode())
        d.setsockopt(zmq.LINGER, 0)
        d.connect(control_ep)
        d.send(enc.encode(Register(service_id=name, service_type=ServiceType.WORKER, pid=i)))
        d.send(enc.encode(ServiceStatus(service_id=name, state=ServiceState.RUNNING)))
        poller.register(d, zmq.POLLIN)
    while not stop.is_set():
        for sock, _ in poller.poll(50):
            command = dec.decode(sock.recv())
            name = bytes(sock.getsockopt(zmq.IDENTITY)).decode()
            sock.send(enc.encode(Ack(request_id=command.request_id, service_id=name)))
    ctx.destroy(linger=0)


def _spawn(target: Callable[..., None], total: int, processes: int,
           *args: object) -> tuple[list[SpawnProcess], Event, Event]:
    spawn = mp.get_context("spawn")
    ready, go, stop = spawn.Semaphore(0), spawn.Event(), spawn.Event()
    procs, first = [], 0
    for p in range(processes):
        count = total // processes + (1 if p < total % processes else 0)
        procs.append(spawn.Process(target=target, args=(*args, first, count, ready, go, stop)))
        first += count
    for proc in procs:
        proc.start()
    for _ in procs:  # every peer imported and waits for go
        if not ready.acquire(timeout=60):
            raise RuntimeError("a peer process did not start within 60 s")
    return procs, go, stop


async def _join(procs: list[SpawnProcess]) -> None:
    for proc in procs:
        await anyio.to_thread.run_sync(proc.join, 20)
        if proc.is_alive():
            proc.kill()


# -- the controller side ------------------------------------------------------------------------

async def pods_run(args: argparse.Namespace, folder: str) -> dict[str, float]:
    """Registration of the pods, then one phase through the real coordinator."""
    pods_ep = endpoint(args.transport, folder, "pods")
    requests = args.rate_per_pod * args.pods * args.seconds
    phase = ConstantPhase(name="profiling", rate=float(args.rate_per_pod * args.pods), requests=requests)
    out: dict[str, float] = {}
    with zmq_context() as ctx:
        async with RouterSocket[PodUpstream](ctx, decode=PodUpstream, channel="pods", bind=[pods_ep],
                                             hwm=100_000) as router:
            coordinator = PodCoordinator(router=router, phases=[phase], seed=1, expected_pods=args.pods,
                                         registration_timeout_s=60, lost_after_s=10)
            procs, go, stop = _spawn(fake_pods, args.pods, args.processes, pods_ep)
            async with anyio.create_task_group() as tg:
                await tg.start(coordinator.run)
                t0 = time.perf_counter()
                go.set()
                await coordinator.wait_registered()
                out["pods_registered_s"] = time.perf_counter() - t0
                await anyio.sleep(0.5)
                t0, c0 = time.perf_counter(), time.process_time()
                totals = await coordinator.start()
                out["phase_wall_s"], out["phase_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
                tg.cancel_scope.cancel()
            stop.set()
            await _join(procs)
    book = totals.phases[0]
    per_pod = [pod_counts(s, args.rate_per_pod, 1e9) for s in [requests // args.pods] * args.pods]
    expected = PodCounts(issued=sum(c.issued for c in per_pod), ok=sum(c.ok for c in per_pod),
                         failed=sum(c.failed for c in per_pod), sent=sum(c.sent for c in per_pod))
    out.update(requests=requests, reports=book.reports, exact=float(book.counts == expected and
                                                                     book.counts.issued == requests),
               lost_pods=len(book.lost_pods), issued=book.counts.issued, ok=book.counts.ok, failed=book.counts.failed)
    return out


async def workers_registration(args: argparse.Namespace, folder: str) -> float:
    """Seconds until the real TimingManager counts `--workers` simulated workers."""
    from aiperf.issuing.engine import TimingManager

    credits_ep, returns_ep = endpoint(args.transport, folder, "wcredits"), endpoint(args.transport, folder, "wreturns")
    with zmq_context() as ctx:
        async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits", bind=[credits_ep]) as credits, \
                PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel, channel="credit_returns",
                                                bind=[returns_ep]) as returns:
            tm = TimingManager(service_id="timing-manager", phases=[], seed=1, expected_workers=args.workers,
                               registration_timeout_s=60, credits=credits, returns=returns,
                               events=controller._NoEvents(),
                               open_conversations=lambda _: controller._Conversations(1000), audit_interval_s=None)
            procs, go, stop = _spawn(fake_workers, args.workers, args.processes, credits_ep, returns_ep)
            async with anyio.create_task_group() as tg:
                await tg.start(tm.run)
                t0 = time.perf_counter()
                go.set()
                await tm.configure("unused")
                elapsed = time.perf_counter() - t0
                tg.cancel_scope.cancel()
            stop.set()
            await _join(procs)
    return elapsed


async def control_registration(args: argparse.Namespace, folder: str) -> tuple[float, float]:
    """Seconds until the real ControlServer counts `--workers` simulated workers registered,
    and seconds for one command asked of all of them (every answer an `Ack`)."""
    control_ep = endpoint(args.transport, folder, "control")
    with zmq_context() as ctx:
        async with RouterSocket[ToController](ctx, decode=ToController, channel="control", bind=[control_ep],
                                              hwm=100_000) as router:
            server = ControlServer(router)
            procs, go, stop = _spawn(fake_services, args.workers, args.processes, control_ep)
            async with anyio.create_task_group() as tg:
                await tg.start(server.run)
                t0 = time.perf_counter()
                go.set()
                await server.wait_registered({ServiceType.WORKER: args.workers}, timeout=60)
                registered = time.perf_counter() - t0
                t0 = time.perf_counter()
                answers = await server.ask_all(
                    list(server.services), lambda _sid, rid: ProfileConfigure(request_id=rid, dataset_dir="/unused"),
                    timeout=60)
                asked = time.perf_counter() - t0
                tg.cancel_scope.cancel()
            stop.set()
            await _join(procs)
    failed = [sid for sid, answer in answers.items() if not isinstance(answer, Ack)]
    if failed:
        raise RuntimeError(f"{len(failed)} simulated workers did not answer Ack (first: {failed[0]})")
    return registered, asked


async def main_async(args: argparse.Namespace) -> None:
    configure_logging(service_id="bench", level="warning")
    folder = tempfile.mkdtemp(prefix="bench-pods-", dir="/tmp")
    try:
        workers_s = await workers_registration(args, folder)
        control_s, ask_s = await control_registration(args, folder)
        run = await pods_run(args, folder)
        ref = argparse.Namespace(workers=100, requests=args.ref_requests, concurrency=1000, transport=args.transport)
        _ref_wall, ref_cpu = await controller.timing_manager_rate(ref, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    per_request_us = 1e6 * run["phase_cpu_s"] / run["requests"]
    per_cpu = run["requests"] / run["phase_cpu_s"]
    print(f"{args.pods:,} simulated pods x {args.rate_per_pod} requests/s for {args.seconds} s "
          f"({args.transport}, peers in {args.processes} processes)")
    print("| figure | value | target |")
    print("|---|---|---|")
    print(f"| registration of {args.pods:,} pods (PodCoordinator) | {run['pods_registered_s']:.2f} s | < 10 s |")
    print(f"| registration of {args.workers:,} workers (TimingManager) | {workers_s:.2f} s | < 10 s |")
    print(f"| registration of {args.workers:,} workers (system-controller's ControlServer) | {control_s:.2f} s | "
          "< 10 s |")
    print(f"| one command asked of all {args.workers:,} workers, every Ack in | {ask_s:.2f} s | - |")
    print(f"| phase: requests (plan) / issued / ok / failed | {run['requests']:,.0f} / {run['issued']:,.0f} / "
          f"{run['ok']:,.0f} / {run['failed']:,.0f} | exact |")
    print(f"| totals exact (sums of the slices == plan), pods lost | {bool(run['exact'])}, {run['lost_pods']:.0f} | "
          "True, 0 |")
    print(f"| phase wall time | {run['phase_wall_s']:.2f} s | - |")
    print(f"| effective requests/s | {run['requests'] / run['phase_wall_s']:,.0f} | 200,000 |")
    print(f"| pod reports taken | {run['reports']:,.0f} | - |")
    print(f"| controller CPU | {run['phase_cpu_s']:.3f} s | - |")
    print(f"| controller CPU per pod report | {1e6 * run['phase_cpu_s'] / run['reports']:.1f} us | - |")
    print(f"| controller CPU per simulated request | {per_request_us:.3f} us | - |")
    print(f"| simulated requests per controller CPU-second | {per_cpu:,.0f} | - |")
    print(f"| reference: per-request TimingManager, credits per CPU-second ({args.ref_requests:,} credits, "
          f"100 workers, C=1000) | {ref_cpu:,.0f} ({1e6 / ref_cpu:.1f} us/credit) | - |")
    print(f"| ratio: requests per controller CPU-second, pods / per-request | {per_cpu / ref_cpu:,.0f}x | - |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--rate-per-pod", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--ref-requests", type=int, default=20000)
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    anyio.run(main_async, parser.parse_args(), backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
