"""Sharded aggregation at 1,000 worker pods (issue 24, item 4): the records-manager merging one
`MetricShard` per pod and phase, beside the current path (every record in `MetricRecordBatch`es)
measured in the same run.

    python scripts/bench/shards.py [--pods 1000] [--rate 200] [--seconds 10] [--senders 4] \
        [--batch-pods 20] [--transport ipc|tcp]

(the repo's source roots on PYTHONPATH, as for the other benchmarks.)

Each simulated pod made `--rate` x `--seconds` profiling requests (a streamed 64-token answer:
63 inter-chunk latencies, its TTFT, latency, ITL, ISL, OSL), plus 20 warmup requests. Its values
come from a seeded generator (`pod_values`), so any process can make the same pod again.

1. shards: `--senders` processes (PUSH, the real codec) hold the pods' shards, each pod's as a
   record-processor in sharded mode would send them: one `MetricShard` for the warmup phase
   and one for the profiling phase, built straight from the pod's columns (`pod_shard`; that
   it equals `Aggregator.shard()` of the pod's records is checked first, on pod 0). The real
   `RecordsManager` (this process, our `PullSocket`) merges them. Figures: seconds and CPU
   seconds of this process from the first shard taken to the last, records/s per CPU second.
   Exactness: p1/p50/p99 of TTFT, request latency and ITL (inter_chunk_latency) from the
   records-manager's merged aggregator, each against numpy over every pod's values
   concatenated; and, for the first `--batch-pods` pods, the whole summary (every statistic,
   the sweep metrics too) of their shards merged equals, bit for bit, the summary of one
   aggregator fed all their records in the same order.
2. batches (today's path): the same records of the first `--batch-pods` pods, sent by the same
   number of processes as `MetricRecordBatch`es of 32 (a saturated record-processor's), to the
   real `RecordsManager`. Figure: records/s per CPU second, and the ratio.

Both runs use export level `summary` (no `profile_export.jsonl`: a shard may carry its
rendered lines, which the records-manager only appends, but 2 M lines of 1.5 KiB do not fit a
2-minute benchmark). Finalize (the summary itself) is not timed here: it is the same for both
paths (`scripts/bench/memory.py sweep` measures it).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec
import numpy as np
import zmq

from aiperf.comms import PullSocket, zmq_context
from aiperf.config import Artifacts, Benchmark
from aiperf.messages import (
    AggregateShard,
    ColumnBytes,
    MetricRecord,
    MetricRecordBatch,
    MetricShard,
    Phase,
    ProfileConfigure,
    RecordChannel,
)
from aiperf.metrics import Aggregator
from aiperf.metrics.catalog import spec_of
from aiperf.runtime import configure_logging

sys.path.insert(0, str(Path(__file__).parent))
from controller import endpoint  # noqa: E402  (one way to name a socket for both benchmarks)

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
GAPS = 63
WARMUP = 20
SCALARS = ("request_latency", "time_to_first_token", "inter_token_latency", "input_sequence_length",
           "output_sequence_length", "output_token_count")
"""The scalar metrics of a pod's records, in the order a record holds them."""


# -- a pod's requests ------------------------------------------------------------------------

def pod_values(pod: int, n: int) -> dict[str, np.ndarray]:
    """Pod `pod`'s `n` profiling requests (200/s: one every 5 ms), the same in every process."""
    rng = np.random.default_rng(pod)
    start = T0 + np.arange(n, dtype=np.int64) * 5 * MS + rng.integers(0, 5 * MS, n)
    ttft = rng.integers(20 * MS, 60 * MS, n)
    icl = rng.integers(MS // 2, 2 * MS, (n, GAPS))
    latency = ttft + icl.sum(axis=1)
    return {"start": start, "end": start + latency, "request_latency": latency, "time_to_first_token": ttft,
            "inter_token_latency": (latency - ttft) // GAPS, "input_sequence_length": rng.integers(100, 200, n),
            "output_sequence_length": np.full(n, GAPS + 1), "output_token_count": np.full(n, GAPS + 1),
            "inter_chunk_latency": icl}


def pod_records(pod: int, n: int) -> list[MetricRecord]:
    """The pod's profiling requests as a record-processor makes their `MetricRecord`s."""
    v = pod_values(pod, n)
    cols = {tag: v[tag].tolist() for tag in SCALARS}
    icl, start, end = v["inter_chunk_latency"].tolist(), v["start"].tolist(), v["end"].tolist()
    return [MetricRecord(phase=Phase.PROFILING, credit_num=pod * n + i, worker_id=f"pod-{pod}",
                         conversation_id=f"c{pod}-{i}", start_wall_ns=start[i], end_wall_ns=end[i],
                         metrics={**{tag: cols[tag][i] for tag in SCALARS}, "inter_chunk_latency": icl[i]},
                         metadata={"x_request_id": f"{pod:05d}{i:027x}"})
            for i in range(n)]


def pod_shard(pod: int, n: int) -> AggregateShard:
    """`Aggregator.shard()` of `pod_records(pod, n)`, built from the columns directly."""
    v = pod_values(pod, n)

    def u32(a: np.ndarray) -> ColumnBytes:
        return ColumnBytes(typecode="I", data=a.astype(np.uint32).tobytes())

    start, end = v["start"], v["end"]
    return AggregateShard(
        success_count=n, scalars={tag: u32(v[tag]) for tag in SCALARS},
        lists={"inter_chunk_latency": u32(v["inter_chunk_latency"].ravel())},
        row_start=start.tobytes(), row_first=(start + v["time_to_first_token"]).tobytes(), row_end=end.tobytes(),
        row_isl=v["input_sequence_length"].astype(np.float64).tobytes(),
        row_osl=v["output_sequence_length"].astype(np.float64).tobytes(),
        row_icl_count=np.full(n, GAPS, np.int64).tobytes(),
        min_start_wall_ns=int(start.min()), max_end_wall_ns=int(end.max()))


def pod_messages(pod: int, n: int) -> list[MetricShard]:
    """What the pod's record-processor sends in sharded mode: one shard per phase."""
    shard = pod_shard(pod, n)
    return [MetricShard(phase=Phase.WARMUP, records=WARMUP, shard=AggregateShard(warmup=WARMUP)),
            MetricShard(phase=Phase.PROFILING, records=n, shard=shard, first_start_wall_ns=shard.min_start_wall_ns or 0)]


# -- simulated record-processors (other processes) -------------------------------------------

def sender(ep: str, pods: list[int], n: int, batch: int, go: mp.synchronize.Event, ready: mp.synchronize.Barrier) -> None:
    """Push the pods' shards (`batch` 0) or their records in batches of `batch`, once `go` is set."""
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(ep)
    enc = msgspec.msgpack.Encoder()
    frames: list[bytes] = []
    for pod in pods:
        if batch:
            records = pod_records(pod, n)
            frames += [enc.encode(MetricRecordBatch(records=records[i:i + batch])) for i in range(0, n, batch)]
        else:
            frames += [enc.encode(m) for m in pod_messages(pod, n)]
    ready.wait()
    go.wait()
    for frame in frames:
        push.send(frame, copy=False)
    push.close(linger=-1)
    ctx.term()


class _Counting:
    """Wraps the records PULL: counts the records handed to the records-manager."""

    def __init__(self, inner: PullSocket[MetricRecordBatch | MetricShard], total: int) -> None:
        self._inner, self._total = inner, total
        self.count = self.messages = 0
        self.first = self.first_cpu = 0.0
        self.all_taken = anyio.Event()

    async def recv(self) -> MetricRecordBatch | MetricShard:
        if self.count == self._total:  # the previous message held the last record, and it was taken
            self.all_taken.set()
        msg = await self._inner.recv()
        if self.count == 0:
            self.first, self.first_cpu = time.perf_counter(), time.process_time()
        self.count += msg.records if isinstance(msg, MetricShard) else len(msg.records)
        self.messages += 1
        return msg


async def take(args: argparse.Namespace, folder: str, pods: int, batch: int) -> tuple[float, float, int, object]:
    """Records-manager time (s) and CPU (s) to take every message of `pods` pods, messages, and
    the records-manager (for the exactness checks)."""
    from aiperf.records_manager.service import RecordsManager

    ep = endpoint(args.transport, folder, f"records-{batch}")
    n = args.rate * args.seconds
    total = pods * (n + (0 if batch else WARMUP))
    spawn = mp.get_context("spawn")
    go, ready = spawn.Event(), spawn.Barrier(args.senders + 1)
    share = [list(range(pods))[i::args.senders] for i in range(args.senders)]
    benchmark = Benchmark(models=["m"], artifacts=Artifacts(export_level="summary"))
    with zmq_context() as ctx:
        async with PullSocket[MetricRecordBatch | MetricShard](ctx, decode=RecordChannel, channel="records",
                                                               bind=[ep]) as pull:
            source = _Counting(pull, total)
            rm = RecordsManager(benchmark=benchmark, run_id="bench", t0_wall_ns=0, records=source, events=None,
                                artifact_dir=Path(folder) / f"artifacts-{batch}")
            procs = [spawn.Process(target=sender, args=(ep, mine, n, batch, go, ready)) for mine in share if mine]
            for p in procs:
                p.start()
            async with anyio.create_task_group() as tg:
                await tg.start(rm.run)
                await rm.handle(ProfileConfigure(request_id="c", dataset_dir=""))
                await anyio.to_thread.run_sync(ready.wait)  # every sender built and encoded its messages
                go.set()
                await source.all_taken.wait()
                elapsed = time.perf_counter() - source.first
                cpu = time.process_time() - source.first_cpu
                tg.cancel_scope.cancel()
            for p in procs:
                await anyio.to_thread.run_sync(p.join, 30)
    return elapsed, cpu, source.messages, rm


def check_pod_shard(n: int) -> None:
    agg = Aggregator()
    agg.add_batch(pod_records(0, n))
    assert agg.shard() == pod_shard(0, n), "pod_shard differs from Aggregator.shard() of the pod's records"


def check_small(pods: int, n: int) -> bool:
    """The whole summary of `pods` pods' shards merged == that of one aggregator fed their records."""
    merged, whole = Aggregator(), Aggregator()
    for pod in range(pods):
        wire = msgspec.msgpack.decode(msgspec.msgpack.encode(pod_messages(pod, n)[1]), type=RecordChannel)
        assert isinstance(wire, MetricShard)
        merged.merge(wire.shard)
        whole.add_batch(pod_records(pod, n))
    a = merged.summary(benchmark_duration_s=merged.observed_duration_s())
    b = whole.summary(benchmark_duration_s=whole.observed_duration_s())
    return repr(a) == repr(b)


def check_percentiles(rm: object, pods: int, n: int) -> list[str]:
    """p1/p50/p99 of three metrics from the records-manager's merged aggregator vs numpy over the
    concatenated values; returns one line per metric."""
    agg: Aggregator = rm._aggregator  # type: ignore[attr-defined]  # the bench reads what it merged
    lines = []
    for tag in ("time_to_first_token", "request_latency", "inter_chunk_latency"):
        ref = np.concatenate([pod_values(p, n)[tag].ravel() for p in range(pods)]).astype(np.float64) * spec_of(tag).scale
        want = np.percentile(ref, [1, 50, 99])
        del ref
        col = agg.column(tag)
        got = np.percentile(col, [1, 50, 99])  # what `summary` computes for this metric
        size = col.size
        del col
        same = bool((want == got).all())
        lines.append(f"{tag}: {size:,} values, p1/p50/p99 {got[0]:.6f}/{got[1]:.6f}/{got[2]:.6f} ms "
                     f"{'== numpy bit for bit' if same else f'!= numpy {want}'}")
    return lines


async def main_async(args: argparse.Namespace) -> None:
    configure_logging(service_id="bench", level="warning")
    n = args.rate * args.seconds
    folder = tempfile.mkdtemp(prefix="bench-shards-", dir="/tmp")
    try:
        check_pod_shard(n)
        small_ok = check_small(args.batch_pods, n)
        s_wall, s_cpu, s_msgs, rm = await take(args, folder, args.pods, 0)
        s_records = args.pods * (n + WARMUP)
        exact = check_percentiles(rm, args.pods, n)
        del rm
        b_wall, b_cpu, b_msgs, _ = await take(args, folder, args.batch_pods, args.batch)
        b_records = args.batch_pods * n
        s_rate, b_rate = s_records / s_cpu, b_records / b_cpu
        print(f"sharded aggregation ({args.transport}; {args.pods:,} simulated pods x {args.rate} requests/s x "
              f"{args.seconds} s = {args.pods * n:,} profiling records of {GAPS + 1} tokens + {WARMUP} warmup each; "
              f"{args.senders} sender processes)")
        print("| path | records | messages | records-manager s | CPU s | records/s | records per CPU s |")
        print("|---|---|---|---|---|---|---|")
        print(f"| shards (one per pod and phase) | {s_records:,} | {s_msgs:,} | {s_wall:.2f} | {s_cpu:.2f} | "
              f"{s_records / s_wall:,.0f} | {s_rate:,.0f} |")
        print(f"| batches of {args.batch} (today) | {b_records:,} | {b_msgs:,} | {b_wall:.2f} | {b_cpu:.2f} | "
              f"{b_records / b_wall:,.0f} | {b_rate:,.0f} |")
        print(f"ratio (records per CPU s, shards / batches): {s_rate / b_rate:,.0f}x; "
              f"{args.pods * args.rate:,} requests/s of pods need {args.pods * args.rate / s_rate * 100:.2f}% of a core "
              f"as shards, {args.pods * args.rate / b_rate:.1f} cores as batches")
        print("exactness (records-manager's merged columns vs numpy over all pods' values concatenated):")
        for line in exact:
            print(f"  {line}")
        print(f"  whole summary of {args.batch_pods} pods' shards merged == one aggregator fed their records: "
              f"{'yes, bit for bit' if small_ok else 'NO'}")
        if not small_ok or not all("bit for bit" in line for line in exact):
            raise SystemExit(1)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=200, help="requests/s per pod")
    parser.add_argument("--seconds", type=int, default=10, help="the profiling phase's length")
    parser.add_argument("--senders", type=int, default=4, help="processes simulating the pods")
    parser.add_argument("--batch-pods", type=int, default=20, help="pods sent as record batches (today's path)")
    parser.add_argument("--batch", type=int, default=32, help="records per MetricRecordBatch")
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    anyio.run(main_async, parser.parse_args(), backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
