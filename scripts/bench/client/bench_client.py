"""Client cost of `aiperf profile` against the mock at zero latency, beside the mock's own
ceiling measured in the same run with a minimal raw client.

    python scripts/bench/client/bench_client.py [--requests 2000] [--concurrency 1 256]

Mock and client are pinned to their own cores (taskset). Our CPU is the rusage of the whole
`aiperf profile` process tree (the CLI waits for every service, so their CPU rolls up), and
the start-up cost is removed by subtracting a short run: CPU-ms per request =
(cpu(N) - cpu(n_small)) / (N - n_small). The figure to watch is our req/s as a fraction of
the mock's ceiling, and CPU-ms per streamed 64-token request (target: at most 4).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from aiperf.mock_server.testing import running_mock

TOKENS = 64


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def raw_ceiling(url: str, concurrency: int, seconds: float) -> float:
    """Requests/s of a minimal aiohttp streaming client (reads bytes, parses nothing)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                       "max_completion_tokens": TOKENS}).encode()
    done = 0
    deadline = time.monotonic() + seconds

    async def loop(session: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.monotonic() < deadline:
            async with session.post(f"{url}/v1/chat/completions", data=body,
                                    headers={"Content-Type": "application/json"}) as resp:
                async for _ in resp.content.iter_any():
                    pass
            done += 1

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        t0 = time.monotonic()
        await asyncio.gather(*(loop(session) for _ in range(concurrency)))
        return done / (time.monotonic() - t0)


def run_aiperf(url: str, concurrency: int, requests: int, core: str, out: Path) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = ["taskset", "-c", core, sys.executable, "-m", "aiperf.cli", "profile", "--model", "m",
           "--url", url, "--streaming", "--concurrency", str(concurrency), "--request-count",
           str(requests), "--osl", str(TOKENS), "--isl", "64", "--artifact-dir", str(out), "--ui", "none"]
    before = children_cpu_s()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = children_cpu_s() - before
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    return cpu, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--small", type=int, default=100, help="requests of the start-up baseline run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--raw-seconds", type=float, default=5.0)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    mock_core, client_core = ("0", "1") if cores >= 2 else ("0", "0")
    os.sched_setaffinity(0, {int(client_core)})
    with running_mock("--output-tokens", str(TOKENS)) as server:
        os.sched_setaffinity(server.proc.pid, {int(mock_core)})  # type: ignore[union-attr]
        print(f"mock on core {mock_core}, clients on core {client_core}; {TOKENS}-token streams, zero latency")
        print(f"{'c':>5} {'raw req/s':>10} {'aiperf req/s':>13} {'ratio':>6} {'CPU-ms/req':>11}")
        for c in args.concurrency:
            ceiling = asyncio.run(raw_ceiling(server.url, c, args.raw_seconds))
            with tempfile.TemporaryDirectory() as tmp:
                small_cpu, _ = run_aiperf(server.url, c, args.small, client_core, Path(tmp) / "small")
                cpu, summary = run_aiperf(server.url, c, args.requests, client_core, Path(tmp) / "big")
            ours = summary["request_throughput"]["avg"]
            per_request_ms = (cpu - small_cpu) / (args.requests - args.small) * 1e3
            print(f"{c:>5} {ceiling:>10.0f} {ours:>13.0f} {ours / ceiling:>6.2f} {per_request_ms:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
