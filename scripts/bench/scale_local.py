"""Long inputs and big concurrency against the bundled mock, on this machine (issue 24, item 5).

Every figure comes from real `aiperf profile` runs (streaming chat) against the bundled mock server
(`aiperf.mock_server`, started here, its processes not counted), with the summed RSS of every
process of the run (the CLI and all its services) sampled every 50 ms with psutil.

1. `isl`: one run per input length (default 10k, 100k, 1M tokens) with a fixed dataset
   (`--entries` prompts) and `--requests` requests. Prints the peak summed RSS, the peak of the
   dataset-manager and of the largest worker, the dataset's text (the size of `inputs.json`), the
   wall time, and TTFT p50 beside the mock's configured TTFT (a 1M-token body is ~5 MB to send
   and parse). Memory should follow the dataset (entries x ISL), not ISL x requests.
2. `concurrency`: one run at `--concurrency` (default 15,000) with `--workers` worker processes
   and a concurrency ramp, against a mock with `--mock-workers` processes whose TTFT/ITL are long
   enough that every request overlaps. Prints requests ok/failed, TTFT and ITL (p50, p99) beside
   the mock's configured values, the peak summed RSS and the wall time.
3. `per-request`: KiB of peak RSS per added request over a long run: `memory.py profile`'s two
   runs (zero-latency mock, 64-token streams, C=64, two request counts), with each kind of
   process's share (the largest instance of each).

    PYTHONPATH=$(ls -d libs/* services/* mock cli | tr '\\n' ':') python scripts/bench/scale_local.py isl
    ... python scripts/bench/scale_local.py concurrency --concurrency 15000 --requests 30000
    ... python scripts/bench/scale_local.py per-request --counts 2000 20000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from memory import RunPeaks, watch_run

MIB = 1 << 20


def profile(url: str, args: list[str], artifacts: str) -> tuple[RunPeaks, float, dict[str, dict[str, float]]]:
    """Run `aiperf profile` with `args`; its peaks, wall time and `profile_export_aiperf.json`."""
    cmd = [sys.executable, "-m", "aiperf.cli", "profile", "--model", "m", "--url", url, "--endpoint-type", "chat",
           "--streaming", "--artifact-dir", artifacts, "--ui", "none", *args]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    root, peaks = psutil.Process(proc.pid), RunPeaks()
    output = watch_run(proc, proc.stdout, lambda: peaks.sample(root))
    summary = json.loads((Path(artifacts) / "profile_export_aiperf.json").read_text())
    for line in output.splitlines():
        if line.startswith(("CLIENT SATURATED", "client overhead")):
            print(f"  aiperf: {line}")
    return peaks, time.monotonic() - started, summary


def _p(summary: dict[str, dict[str, float]], metric: str, stat: str) -> float:
    return float(summary.get(metric, {}).get(stat, float("nan")))


def run_isl(isls: list[int], entries: int, requests: int, ttft_ms: float) -> None:
    from aiperf.mock_server.testing import MockProcess

    server = MockProcess("--ttft-ms", str(ttft_ms), "--itl-ms", "5", "--output-tokens", "16").start()
    try:
        for isl in isls:
            with tempfile.TemporaryDirectory() as tmp:
                peaks, took, summary = profile(server.url, [
                    "--isl", str(isl), "--num-dataset-entries", str(entries), "--request-count", str(requests),
                    "--concurrency", "2", "--workers-max", "2"], tmp)
                text = (Path(tmp) / "inputs.json").stat().st_size
            worker = max((v for k, v in peaks.by_service.items() if k == "worker"), default=0)
            print(f"isl {isl:>9,} x {entries} entries, {requests} requests: peak RSS all {peaks.total / MIB:7.1f} MiB, "
                  f"dataset-manager {peaks.by_service.get('dataset_manager', 0) / MIB:6.1f} MiB, "
                  f"worker {worker / MIB:6.1f} MiB; dataset text {text / MIB:6.1f} MiB; "
                  f"TTFT p50 {_p(summary, 'time_to_first_token', 'p50'):7.1f} ms (mock {ttft_ms:g}); "
                  f"ok {int(_p(summary, 'request_count', 'avg'))}; {took:.0f} s", flush=True)
    finally:
        server.stop()


def run_concurrency(concurrency: int, requests: int, workers: int, mock_workers: int, ramp_s: float,
                    ttft_ms: float, itl_ms: float, osl: int) -> None:
    from aiperf.mock_server.testing import MockProcess

    server = MockProcess("--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--output-tokens", str(osl),
                         "--workers", str(mock_workers)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            peaks, took, summary = profile(server.url, [
                "--concurrency", str(concurrency), "--request-count", str(requests), "--workers-max", str(workers),
                *(["--concurrency-ramp-duration", str(ramp_s)] if ramp_s > 0 else []),
                "--isl", "100", "--num-dataset-entries", "100"], tmp)
    finally:
        server.stop()
    ok = int(_p(summary, "request_count", "avg"))
    failed = int(_p(summary, "error_request_count", "avg")) if "error_request_count" in summary else 0
    print(f"concurrency {concurrency:,} ({workers} workers, mock {mock_workers} processes, ramp {ramp_s:g} s): "
          f"{ok:,} ok, {failed:,} failed of {requests:,}; {took:.0f} s; peak RSS all {peaks.total / MIB:.1f} MiB")
    for metric, label, configured in (("time_to_first_token", "TTFT", ttft_ms), ("inter_token_latency", "ITL", itl_ms)):
        p50, p99 = _p(summary, metric, "p50"), _p(summary, metric, "p99")
        print(f"  {label} p50 {p50:9.1f} ms ({p50 - configured:+.1f}), p99 {p99:9.1f} ms ({p99 - configured:+.1f}); "
              f"mock configured {configured:g} ms")
    top = sorted(peaks.by_service.items(), key=lambda kv: -kv[1])[:4]
    print("  peak RSS of the largest process of each kind: "
          + ", ".join(f"{name} {rss / MIB:.1f} MiB" for name, rss in top))
    for metric in ("http_req_connecting", "credit_to_send_delay", "effective_concurrency"):
        if metric in summary:
            print(f"  {metric} p50 {_p(summary, metric, 'p50'):.2f}, p99 {_p(summary, metric, 'p99'):.2f} "
                  f"{summary[metric].get('unit', '')}")


def run_per_request(counts: list[int], entries: int | None) -> None:
    """`memory.py profile`'s runs (zero-latency mock, 64-token streams, C=64), with the peak of
    each kind of process beside the sum, so the KiB per added request says where it goes.
    `entries`: a fixed dataset (--num-dataset-entries); None: one prompt per request (the
    default), so the dataset grows with the count too."""
    from aiperf.mock_server.testing import MockProcess

    server = MockProcess("--ttft-ms", "0", "--itl-ms", "0", "--output-tokens", "64").start()
    runs = []
    try:
        for n in counts:
            with tempfile.TemporaryDirectory() as tmp:
                fixed = ["--num-dataset-entries", str(entries)] if entries else []
                peaks, took, _ = profile(server.url, ["--concurrency", "64", "--request-count", str(n), "--osl", "64",
                                                      *fixed], tmp)
            runs.append((n, peaks))
            print(f"per-request {n:>9,} requests: peak RSS all {peaks.total / MIB:7.1f} MiB ({took:.0f} s)", flush=True)
    finally:
        server.stop()
    for (n0, p0), (n1, p1) in zip(runs, runs[1:], strict=False):
        print(f"  {n0:,} -> {n1:,}: {(p1.total - p0.total) / 1024 / (n1 - n0):.3f} KiB per added request; by process: "
              + ", ".join(f"{k} {(p1.by_service[k] - p0.by_service.get(k, 0)) / 1024 / (n1 - n0):+.3f}"
                          for k in sorted(p1.by_service, key=lambda k: -(p1.by_service[k] - p0.by_service.get(k, 0)))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("isl", "concurrency", "per-request"))
    p.add_argument("--isls", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--entries", type=int, default=None,
                   help="distinct prompts (isl: default 4; per-request: default 100, 0: one per request)")
    p.add_argument("--requests", type=int, default=None,
                   help="isl: requests per run (default 8); concurrency: requests (default 2 x concurrency)")
    p.add_argument("--concurrency", type=int, default=15_000)
    p.add_argument("--workers", type=int, default=4, help="concurrency: worker processes (default 4)")
    p.add_argument("--mock-workers", type=int, default=2, help="concurrency: mock processes (default 2)")
    p.add_argument("--ramp", type=float, default=15.0, help="concurrency: ramp seconds (default 15; 0: none)")
    p.add_argument("--ttft-ms", type=float, default=None, help="mock TTFT (isl: 50, concurrency: 30000)")
    p.add_argument("--itl-ms", type=float, default=250.0, help="concurrency: mock ITL (default 250)")
    p.add_argument("--osl", type=int, default=8, help="concurrency: output tokens (default 8)")
    p.add_argument("--counts", type=int, nargs="+", default=[2000, 20_000], help="per-request: request counts")
    args = p.parse_args()
    if args.mode == "isl":
        run_isl(args.isls, args.entries or 4, args.requests or 8, args.ttft_ms if args.ttft_ms is not None else 50.0)
    elif args.mode == "concurrency":
        run_concurrency(args.concurrency, args.requests or 2 * args.concurrency, args.workers, args.mock_workers,
                        args.ramp, args.ttft_ms if args.ttft_ms is not None else 30_000.0, args.itl_ms, args.osl)
    else:
        run_per_request(args.counts, 100 if args.entries is None else args.entries)


if __name__ == "__main__":
    main()
