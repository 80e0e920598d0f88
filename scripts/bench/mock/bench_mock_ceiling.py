"""Ceiling of the bundled mock server: requests/s and mock CPU per request at zero latency.

Starts ``python -m aiperf.mock_server.main`` on a free port with TTFT = ITL = 0 and a fixed output
length, then drives streaming chat completions with a minimal aiohttp client at each concurrency
for a fixed duration. Prints one line per concurrency: requests/s, tokens/s, and mock CPU
milliseconds per request (user + system of the granian supervisor and its workers, via psutil).

    PYTHONPATH=mock .venv/bin/python scripts/bench/mock/bench_mock_ceiling.py [--seconds 5]
        [--concurrency 1 64] [--tokens 64] [--workers 1]

The client shares the machine with the server, so on small machines the client's own CPU caps the
figure; CPU-ms per request is the number that says how cheap the mock is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil

_MOCK_ROOT = Path(__file__).resolve().parents[3] / "mock"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _mock_cpu_seconds(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


async def _wait_healthy(session: aiohttp.ClientSession, url: str, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            async with session.get(url + "/health") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("mock server did not become healthy")
        await asyncio.sleep(0.05)


async def _run_level(session: aiohttp.ClientSession, url: str, *, concurrency: int, seconds: float,
                     tokens: int) -> tuple[int, float]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": tokens,
            "stream": True}
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            async with session.post(url + "/v1/chat/completions", json=body) as r:
                async for _ in r.content.iter_any():
                    pass
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}")
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.perf_counter() - start


async def _bench(args: argparse.Namespace) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_MOCK_ROOT), *sys.path])}
    cmd = [sys.executable, "-m", "aiperf.mock_server.main", "--port", str(port),
           "--workers", str(args.workers), "--output-tokens", str(args.tokens)]
    server = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        proc = psutil.Process(server.pid)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            await _wait_healthy(session, url, 30.0)
            await _run_level(session, url, concurrency=4, seconds=0.5, tokens=args.tokens)  # warm-up
            print(f"mock ceiling: {args.tokens}-token streams, TTFT=ITL=0, workers={args.workers}, "
                  f"cpus={os.cpu_count()}")
            for c in args.concurrency:
                cpu0 = _mock_cpu_seconds(proc)
                n, elapsed = await _run_level(session, url, concurrency=c, seconds=args.seconds,
                                              tokens=args.tokens)
                cpu = _mock_cpu_seconds(proc) - cpu0
                print(f"c={c:<4d} {n / elapsed:9.1f} req/s  {n * args.tokens / elapsed:11.0f} tok/s  "
                      f"mock {1000 * cpu / max(n, 1):6.3f} CPU-ms/req  ({n} requests in {elapsed:.1f}s)")
    finally:
        server.terminate()
        server.wait(timeout=15)


def main() -> None:
    """Parse flags and run the benchmark; blocks for about ``len(concurrency) * seconds``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--workers", type=int, default=1)
    asyncio.run(_bench(p.parse_args()))


if __name__ == "__main__":
    main()
