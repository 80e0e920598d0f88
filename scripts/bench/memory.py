"""Memory per request, two ways (issue 13, item 7; target <= 0.5 KiB per added request):

1. `profile`: real `aiperf profile` runs against the bundled mock at zero latency (streaming chat,
   64-token answers, C=64) at two request counts; the peak, over time, of the summed RSS of every
   process of the run (the CLI and all its services; the mock not counted), sampled every 50 ms
   with psutil. KiB per request = difference of the peaks / difference of the counts.
2. `feed`: the records path alone at a scale a real run cannot reach here: one records-manager
   (the real `RecordsManager`, in a child process, PULL on a real ZMQ IPC socket) fed simulated
   64-token `MetricRecord`s by this process (PUSH, in `MetricRecordBatch`es as a record-processor
   sends them), then `Finalize` (the summary and its exact
   percentiles computed, `--export-level summary`: no per-request jsonl). RSS of the
   records-manager process before the first record, once every record is stored, and its peak
   (ru_maxrss: computing the summary's sweep metrics over every chunk is the peak).
3. `sweep`: that peak alone: `aiperf.metrics.sweepline.sweep_metrics` over the same simulated
   64-token requests (63 chunk gaps, stored as uint32 as the aggregator stores them), its
   tracemalloc peak per request and its CPU time.
4. `processor`: the record-processor's path alone (`RecordProcessor.process`, bundled tokenizer)
   in this process over simulated 64-token records: RSS and traced memory per added record.

    PYTHONPATH=$(ls -d libs/* services/* mock cli | tr '\\n' ':') python scripts/bench/memory.py \\
        profile --counts 2000 10000
    ... python scripts/bench/memory.py feed --counts 10000 1000000
    ... python scripts/bench/memory.py sweep --counts 10000 100000
    ... python scripts/bench/memory.py processor --counts 10000 30000 90000
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import psutil

MIB = 1 << 20


class RunPeaks:
    """Peak RSS over time of a process tree: summed, and per service (the module after
    `aiperf.boot` in a service's command line; the largest instance of each)."""

    def __init__(self) -> None:
        self.total = 0
        self.by_service: dict[str, int] = {}

    def sample(self, root: psutil.Process) -> None:
        total = 0
        for p in [root, *root.children(recursive=True)]:
            try:
                rss, cmd = p.memory_info().rss, p.cmdline()
            except psutil.Error:
                continue
            total += rss
            name = "zygote" if "--zygote" in cmd else next(
                (c.removeprefix("aiperf.").removesuffix(".main") for c in cmd if c.endswith(".main")), "cli")
            self.by_service[name] = max(self.by_service.get(name, 0), rss)
        self.total = max(self.total, total)


def watch_run(proc: subprocess.Popen[bytes], output: IO[bytes] | None, sample: Callable[[], None]) -> str:
    """Call `sample` every 50 ms until `proc` exits (a vanished process between two calls is
    skipped), reading its `output` pipe meanwhile (a full pipe would stall it); that output's
    text. `SystemExit` naming the failure when `proc` exits non-zero."""
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(output.read() if output else b""))
    reader.start()
    while proc.poll() is None:
        try:
            sample()
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join()
    text = b"".join(chunks).decode(errors="replace")
    if proc.returncode:
        raise SystemExit(f"aiperf profile failed ({proc.returncode}): {text[-2000:]}")
    return text


def profile_peak(url: str, count: int, artifacts: str) -> tuple[int, float]:
    """Peak summed RSS (bytes) of one `aiperf profile` run of `count` requests, and its wall time."""
    cmd = [sys.executable, "-m", "aiperf.cli", "profile", "--model", "m", "--url", url, "--endpoint-type", "chat",
           "--streaming", "--concurrency", "64", "--request-count", str(count), "--osl", "64",
           "--artifact-dir", artifacts, "--ui", "none"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root, peaks = psutil.Process(proc.pid), RunPeaks()
    watch_run(proc, proc.stderr, lambda: peaks.sample(root))
    return peaks.total, time.monotonic() - started


def run_profile(counts: list[int]) -> None:
    from aiperf.mock_server.testing import MockProcess

    server = MockProcess("--ttft-ms", "0", "--itl-ms", "0", "--output-tokens", "64").start()
    try:
        peaks = []
        for n in counts:
            with tempfile.TemporaryDirectory() as tmp:
                peak, took = profile_peak(server.url, n, tmp)
            peaks.append(peak)
            print(f"profile {n:>9} requests: peak RSS of all processes {peak / MIB:7.1f} MiB ({took:.0f} s)")
    finally:
        server.stop()
    for i in range(1, len(counts)):
        (n0, p0), (n1, p1) = (counts[i - 1], peaks[i - 1]), (counts[i], peaks[i])
        print(f"  {n0} -> {n1}: {(p1 - p0) / 1024 / (n1 - n0):.3f} KiB per added request")


HWM_BATCHES = 32
"""Socket queues of the feed, in batches (~1,000 records): records wait in the sender."""


def _record(n: int) -> object:
    from aiperf.messages import MetricRecord, Phase

    ms = 1_000_000
    metrics: dict[str, float | list[float]] = {
        "time_to_first_token": 40 * ms + n % 997, "time_to_second_token": 8 * ms, "request_latency": 545 * ms + n % 991,
        "inter_token_latency": 8 * ms + n % 13, "decode_duration": 504 * ms, "time_to_first_output_token": 40 * ms,
        "output_token_throughput_per_user": 125.0 + (n % 7) / 3, "e2e_output_token_throughput": 117.6 + (n % 5) / 7,
        "prefill_throughput_per_user": 2500.0, "output_sequence_length": 64, "input_sequence_length": 128,
        "output_token_count": 64, "requested_osl": 64, "osl_mismatch_diff_pct": 0.0,
        "credit_to_start_latency": 200_000 + n % 1000, "credit_to_send_delay": 100_000 + n % 777,
        "effective_latency": 545 * ms, "co_aware_request_latency": 545 * ms,
        **{f"http_req_{k}": v for k, v in (("blocked", 0), ("dns_lookup", 0), ("connecting", 0), ("sending", 20_000),
                                           ("waiting", 39 * ms), ("receiving", 506 * ms), ("duration", 545 * ms),
                                           ("connection_overhead", 0), ("total", 545 * ms), ("data_sent", 700),
                                           ("data_received", 9000), ("chunks_sent", 1), ("chunks_received", 64),
                                           ("connection_reused", 1))},
        "inter_chunk_latency": [8 * ms + (n + i) % 101 for i in range(63)],
    }
    t = 1_700_000_000_000_000_000 + n * 1_000_000
    return MetricRecord(phase=Phase.PROFILING, credit_num=n, worker_id=f"worker-{n % 4}", conversation_id="c",
                        start_wall_ns=t, end_wall_ns=t + 545 * ms, metrics=metrics,
                        metadata={"request_start_ns": t, "benchmark_phase": "profiling"})


async def _child(endpoint: str, count: int, out_dir: str) -> None:
    """The records-manager side: PULL `count` records, finalize, print RSS figures."""
    import anyio
    import zmq.asyncio

    from aiperf.comms import PullSocket
    from aiperf.config import Artifacts, Benchmark
    from aiperf.messages import Finalize, MetricRecordBatch, Phase, PhaseAccounting, RunAccounting, RecordChannel
    from aiperf.records_manager.service import RecordsManager

    zctx = zmq.asyncio.Context()
    base = psutil.Process().memory_info().rss
    stored = [0]
    # a small queue (hwm): the records wait in the sender, not in this process's socket buffers
    async with PullSocket[MetricRecordBatch](zctx, decode=RecordChannel, channel="records", bind=[endpoint],
                                             hwm=HWM_BATCHES) as pull:
        rm = RecordsManager(benchmark=Benchmark(models=["m"], artifacts=Artifacts(export_level="summary")),
                            run_id="mem", t0_wall_ns=0, records=pull, events=None, artifact_dir=Path(out_dir))
        print("ready", flush=True)
        async with anyio.create_task_group() as tg:
            await tg.start(rm.run)
            started = time.monotonic()
            while rm._aggregator.record_count < count:  # a benchmark may peek: every record stored
                await anyio.sleep(0.02)
            stored[0] = psutil.Process().memory_info().rss  # before the summary is computed
            acct = RunAccounting(phases={Phase.PROFILING: PhaseAccounting(issued=count, returned=count, ok=count)})
            done = await rm.handle(Finalize(request_id="f", accounting=acct, records_timeout_s=3600))
            received = time.monotonic() - started
            tg.cancel_scope.cancel()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"result base={base} stored={stored[0]} peak={peak} balanced={getattr(done, 'balanced', None)} took={received:.1f}", flush=True)
    zctx.destroy(linger=0)


def run_feed(counts: list[int]) -> None:
    import msgspec
    import zmq

    from aiperf.messages import MetricRecordBatch
    from aiperf.record_processor.batching import MAX_RECORDS

    results = []
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="aim-", dir="/tmp") as tmp:
            endpoint = f"ipc://{tmp}/records.ipc"
            child = subprocess.Popen([sys.executable, __file__, "_child", endpoint, str(count), tmp],
                                     stdout=subprocess.PIPE, text=True)
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            ctx = zmq.Context()
            push = ctx.socket(zmq.PUSH)
            push.setsockopt(zmq.SNDHWM, HWM_BATCHES)
            push.connect(endpoint)
            enc = msgspec.msgpack.Encoder()
            started = time.monotonic()
            for first in range(0, count, MAX_RECORDS):
                batch = [_record(n) for n in range(first, min(first + MAX_RECORDS, count))]
                push.send(enc.encode(MetricRecordBatch(records=batch)))
            line = child.stdout.read()
            child.wait()
            push.close(linger=0)
            ctx.term()
        fields = dict(kv.split("=") for kv in line.split("result ", 1)[1].split())
        base, stored, peak = int(fields["base"]), int(fields["stored"]), int(fields["peak"])
        results.append((count, base, peak))
        print(f"feed {count:>9} records: records-manager RSS before {base / MIB:.1f} MiB, "
              f"with every record stored {stored / MIB:.1f} MiB ({(stored - base) / 1024 / count:.3f} KiB per record), "
              f"peak with the summary {peak / MIB:.1f} MiB ({(peak - base) / 1024 / count:.3f} KiB per record); "
              f"balanced {fields['balanced']}; {time.monotonic() - started:.0f} s")
    if len(results) > 1:
        (n0, _, p0), (n1, _, p1) = results[0], results[-1]
        print(f"  {n0} -> {n1}: {(p1 - p0) / 1024 / (n1 - n0):.3f} KiB per added record")


def _timeline(n: int) -> object:
    """`n` requests shaped like `_record`'s, as the aggregator hands them to the sweep metrics."""
    import numpy as np

    from aiperf.metrics.sweepline import Timeline

    ms, i = 1_000_000, np.arange(n, dtype=np.int64)
    gaps = (8 * ms + (i[:, None] + np.arange(63)[None, :]) % 101).astype(np.uint32).ravel()
    return Timeline(start=i * ms, first=i * ms + 40 * ms + i % 997, has_first=np.ones(n, bool),
                    end=i * ms + 545 * ms + i % 991, isl=np.full(n, 128.0), osl=np.full(n, 64.0), icl=gaps,
                    icl_counts=np.full(n, 63, np.int64))


def run_sweep(counts: list[int]) -> None:
    import tracemalloc

    from aiperf.metrics.sweepline import sweep_metrics

    with tempfile.TemporaryDirectory() as spill:  # where the records-manager's pieces go: its artifact dir
        sweep_metrics(_timeline(10), spill=Path(spill))  # numpy's first-call allocations are not the summary's
        peaks: list[tuple[int, int]] = []
        for n in counts:
            tl = _timeline(n)
            started = time.process_time()
            sweep_metrics(tl, spill=Path(spill))
            took = time.process_time() - started
            tracemalloc.start()
            sweep_metrics(tl, spill=Path(spill))
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"sweep {n:>9} requests: peak {peak / MIB:8.1f} MiB above the stored timeline "
                  f"({peak / n:6.0f} bytes per request), CPU {took:.2f} s")
            peaks.append((n, peak))
        for (n0, p0), (n1, p1) in zip(peaks, peaks[1:], strict=False):
            print(f"  {n0:,} -> {n1:,}: {(p1 - p0) / (n1 - n0) / 1024:.3f} KiB per added request")


def run_processor(counts: list[int]) -> None:
    """The record-processor's own path: `RecordProcessor.process` in this process (configured
    through `ProfileConfigure`, the bundled tokenizer) over simulated 64-token streamed records,
    RSS and the memory `tracemalloc` traces after each count. The tokenizer's one-time step
    (tiktoken's encoding, built once 1,000,000 characters were encoded in Python: ~4,000 of
    these records) comes before a first count of 10,000."""
    import gc
    import tracemalloc

    import anyio

    from aiperf.config import Endpoint
    from aiperf.messages import ProfileConfigure
    from aiperf.record_processor.service import RecordProcessor
    from aiperf.testing.feeds import streamed_chat_record

    records = [streamed_chat_record(i, worker_id="worker-g0-0", conversation_id=f"c{i}", words=64)
               for i in range(1000)]

    async def go() -> None:
        rp = RecordProcessor(service_id="rp", endpoint=Endpoint(urls=["http://mock"], streaming=True),
                             tokenizer=None, raw=None, out=None)  # type: ignore[arg-type]  # process() only
        await rp.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        tracemalloc.start()
        done, before = 0, None
        for n in counts:
            while done < n:
                rp.process(records[done % len(records)])
                done += 1
            gc.collect()
            now = (psutil.Process().memory_info().rss, tracemalloc.get_traced_memory()[0])
            added = "" if before is None else (f"; per added record: RSS {(now[0] - before[1][0]) / 1024 / (n - before[0]):+.3f} KiB, "
                                               f"traced {(now[1] - before[1][1]) / 1024 / (n - before[0]):+.4f} KiB")
            print(f"processor {n:>9} records: RSS {now[0] / MIB:7.1f} MiB, traced {now[1] / MIB:6.2f} MiB{added}", flush=True)
            before = (n, now)

    anyio.run(go)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        import anyio

        anyio.run(_child, sys.argv[2], int(sys.argv[3]), sys.argv[4], backend_options={"use_uvloop": True})
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("profile", "feed", "sweep", "processor"))
    p.add_argument("--counts", type=int, nargs="+", default=None)
    args = p.parse_args()
    if args.mode == "profile":
        run_profile(args.counts or [2000, 10_000])
    elif args.mode == "processor":
        run_processor(args.counts or [10_000, 30_000])
    elif args.mode == "sweep":
        run_sweep(args.counts or [10_000, 100_000])
    else:
        run_feed(args.counts or [10_000, 1_000_000])


if __name__ == "__main__":
    main()
