"""Can one worker carry N concurrent streams (AIPerf's default: 250 per worker) without its
timestamps degrading? One worker process (uvloop, real IPC sockets, wired by
`aiperf.worker.main.build`, pinned to `--core`) runs a closed loop of `--concurrency` streams
against the bundled mock (its own processes, on the other cores), and prints:

- the worker's event-loop lag p50/p99/max (its own probe, `aiperf.worker.load`) and CPU share;
- TTFT and ITL as measured minus the mock's configured `--ttft-ms`/`--itl-ms` (p50/p99):
  the error of our timestamps plus any lateness of the mock itself.

    PYTHONPATH=$(ls -d libs/* services/* mock | tr '\\n' ':') python scripts/bench/worker/loop_lag.py \\
        --concurrency 250 --requests 2000 --core 1

`AIPERF_HTTP_CLIENT=aiohttp` measures the previous HTTP client.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import anyio
import msgspec
import numpy as np
from worker_cpu import bench, make_dataset, start_mock

from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import RequestRecord
from aiperf.metrics import compute_metrics
from aiperf.metrics.saturation import worker_load


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, default=250)
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--ttft-ms", type=float, default=100.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--mock-workers", type=int, default=1, help="mock server processes")
    p.add_argument("--core", type=int, default=None, help="pin this process (the worker) to this core")
    args = p.parse_args()
    ipc_dir = tempfile.mkdtemp(prefix="aib-", dir="/tmp")
    data_dir = tempfile.mkdtemp(prefix="aibd-")
    make_dataset(data_dir, args.tokens)
    server = start_mock(f"{args.ttft_ms:g}", f"{args.itl_ms:g}", args.tokens, "--workers", str(args.mock_workers))
    if args.core is not None:  # after the mock started: it keeps every core
        os.sched_setaffinity(0, {args.core})
    try:
        run = anyio.run(bench, server.url, args.requests, args.concurrency, args.tokens, ipc_dir, data_dir,
                        backend_options={"use_uvloop": True})
    finally:
        server.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    dec = msgspec.msgpack.Decoder(RequestRecord)
    ttft, itl = [], []
    for raw in run.raw:
        record = dec.decode(raw)
        metrics = compute_metrics(record, parse_response(EndpointType.CHAT, True, record), count_tokens=len).metrics
        ttft.append(float(metrics["time_to_first_token"]) / 1e6 - args.ttft_ms)
        gaps = metrics.get("inter_chunk_latency") or []
        assert isinstance(gaps, list)
        itl.extend(g / 1e6 - args.itl_ms for g in gaps)
    load = worker_load(run.load) if run.load is not None else {}
    client = os.environ.get("AIPERF_HTTP_CLIENT", "h1")
    print(f"{client} client, {args.concurrency} streams, {len(run.raw)} requests of {args.tokens} tokens "
          f"(mock TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms), {len(run.raw) / run.wall_s:.0f} req/s, "
          f"worker CPU {run.cpu_s / run.wall_s:.0%} of a core (this process)")
    print(f"loop lag: p50 {load.get('loop_lag_p50_ms')} ms, p99 {load.get('loop_lag_p99_ms')} ms, "
          f"max {load.get('loop_lag_max_ms')} ms over {load.get('ticks')} ticks")
    for name, errors in (("TTFT", ttft), ("ITL", itl)):
        a = np.asarray(errors)
        print(f"{name} error vs the mock: p50 {np.percentile(a, 50):+.2f} ms, p99 {np.percentile(a, 99):+.2f} ms, "
              f"mean {a.mean():+.2f} ms ({a.size} samples)")


if __name__ == "__main__":
    main()
