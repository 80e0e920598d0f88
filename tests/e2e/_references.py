"""What the operating system did to a run, measured alongside it, for the timing checks.

A timing check measures the operating system too: on a loaded machine (a busy laptop, a CI
runner, `./pants test ::` running test files in parallel) the processes of a run wait for a CPU,
so timed waits wake late and streams are read late. Rather than retrying, or comparing with
another process that may or may not have been held up at the same moments, a check asks the
kernel how long the run's own threads waited:

- `RunQueueWait` samples, while the run goes on, the cumulative run-queue wait of every thread
  of the watched processes (`/proc/PID/task/TID/schedstat`: time spent runnable but not
  running); `waited_ms(lo, hi)` bounds from above how long they waited between two moments.
- `wire_overhead_ms` measures the time to the first streamed byte of a minimal client against a
  zero-TTFT mock (the loopback HTTP cost that aiperf's TTFT includes too), as measured and less
  the run-queue waits of the client and the mock meanwhile.

A delay as measured is at least what an idle machine would show, and the same delay less the
waits of the threads it went through is at most that, as long as load delays them only by
keeping them off a CPU (every wait counted could have delayed it, and the sum over whole
sampling intervals only counts more). So a check that bounds a delay from above is made on the
value less the waits, one that bounds it from below on the value as measured: both hold
whenever they would hold on an idle machine, where nothing waits, the two values are the same
and the checks are as strict as before. Under load they get looser by what the load took.

Times are wall-clock ns (`time.time_ns()`), as `profile_export.jsonl` stamps `request_start_ns`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from bisect import bisect_left, bisect_right
from types import TracebackType
from typing import NamedTuple

import aiohttp
import orjson


def _descendants(roots: list[int]) -> list[int]:
    """`roots` and every process below them (through /proc/PID/task/TID/children)."""
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo.extend(int(child) for child in fh.read().split())
        except OSError:  # exited meanwhile
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class RunQueueWait:
    """Run-queue wait of some processes over time, sampled in a thread during a `with` block.

    Watched: each root pid and its descendants whose command line matches the root's pattern
    (every one when the pattern is None), looked for again every `discover_s` (services start
    late), with all their threads. Every `interval_s` the sampler reads each watched thread's
    cumulative wait and adds its increase to a running total. A thread seen for the first time
    adds all of its past wait at once, which can only make a bound larger; a thread that ends
    loses its wait since the last sample (the services' threads live as long as the run).
    Entering raises `RuntimeError` when the kernel does not report run-queue waits.
    """

    def __init__(self, roots: dict[int, str | None], *, interval_s: float = 0.002,
                 discover_s: float = 0.1) -> None:
        self._roots = {pid: None if pattern is None else re.compile(pattern) for pid, pattern in roots.items()}
        self._interval_s, self._discover_s = interval_s, discover_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="run-queue-wait", daemon=True)
        self._files: dict[tuple[int, str], int] = {}  # (pid, tid) -> open schedstat
        self._last: dict[tuple[int, str], int] = {}
        self._total_ns = 0
        self._before: list[int] = []  # per sample: wall ns before the first read,
        self._after: list[int] = []   # after the last read,
        self._totals: list[int] = []  # and the running total
        self.watched: set[int] = set()
        """Every pid watched at some point."""

    def __enter__(self) -> RunQueueWait:
        if not os.path.exists(f"/proc/{os.getpid()}/schedstat"):
            raise RuntimeError("this kernel does not report run-queue waits (/proc/PID/schedstat)")
        self._discover()
        self._read()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._read()
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

    def waited_ms(self, lo_ns: int, hi_ns: int) -> float:
        """How long (ms) the watched threads waited for a CPU, summed, from the last sample
        before wall-clock `lo_ns` to the first after `hi_ns`: at least as long as they waited
        between the two. `AssertionError` unless sampling covered the interval."""
        assert self._after[0] <= lo_ns <= hi_ns <= self._before[-1], "run-queue sampling did not cover the interval"
        first = bisect_right(self._after, lo_ns) - 1  # last sample read wholly at or before lo
        last = bisect_left(self._before, hi_ns)       # first sample read wholly at or after hi
        return (self._totals[last] - self._totals[first]) / 1e6

    def _sample(self) -> None:
        next_discovery = time.monotonic() + self._discover_s
        while not self._stop.wait(self._interval_s):
            if time.monotonic() >= next_discovery:
                self._discover()
                next_discovery = time.monotonic() + self._discover_s
            self._read()

    def _discover(self) -> None:
        # A command line is read again until it matches: right after fork a child still shows
        # its parent's, until it execs.
        for root, pattern in self._roots.items():
            for pid in _descendants([root]):
                if pid not in self.watched and (pattern is None or pattern.search(_cmdline(pid))):
                    self.watched.add(pid)
        for pid in self.watched:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:  # exited
                continue
            for tid in tids:
                if (pid, tid) not in self._files:
                    try:
                        self._files[pid, tid] = os.open(f"/proc/{pid}/task/{tid}/schedstat", os.O_RDONLY)
                    except OSError:
                        continue

    def _read(self) -> None:
        before = time.time_ns()
        for key, fd in list(self._files.items()):
            try:
                # "<on-cpu ns> <run-queue wait ns> <timeslices>"; re-read from offset 0.
                wait = int(os.pread(fd, 128, 0).split()[1])
            except (OSError, IndexError, ValueError):  # the thread ended
                os.close(fd)
                del self._files[key]
                continue
            self._total_ns += wait - self._last.get(key, 0)
            self._last[key] = wait
        self._before.append(before)
        self._after.append(time.time_ns())
        self._totals.append(self._total_ns)


async def _first_bytes(url: str, requests: int, concurrency: int) -> list[tuple[int, int]]:
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                         "max_completion_tokens": 1})
    headers = {"Content-Type": "application/json"}
    out: list[tuple[int, int]] = []

    async def one(session: aiohttp.ClientSession) -> None:
        wall, start = time.time_ns(), time.perf_counter_ns()
        async with session.post(f"{url}/v1/chat/completions", data=body, headers=headers) as resp:
            resp.raise_for_status()
            async for _ in resp.content.iter_any():
                out.append((wall, time.perf_counter_ns() - start))
                break
            await resp.read()

    async with aiohttp.ClientSession() as session:
        for _ in range(requests // concurrency):
            await asyncio.gather(*(one(session) for _ in range(concurrency)))
    return out


class WireOverhead(NamedTuple):
    """Mean time (ms) to the first streamed byte: as measured, and less run-queue waits."""

    measured_ms: float
    less_waits_ms: float


def wire_overhead_ms(url: str, mock_pid: int, *, requests: int = 40, concurrency: int = 4) -> WireOverhead:
    """The loopback HTTP cost against the zero-TTFT mock at `url` (process `mock_pid`), by a
    minimal aiohttp client in a child process, each request also less the run-queue wait of the
    client and the mock meanwhile (not below zero)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen([sys.executable, "-m", "e2e._references", url, "--requests", str(requests),
                           "--concurrency", str(concurrency)], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc, \
            RunQueueWait({proc.pid: None, mock_pid: None}) as waits:
        out, err = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"the minimal client failed: {err.decode(errors='replace')}")
    samples = orjson.loads(out)
    measured = [ns / 1e6 for _, ns in samples]
    less_waits = [max(ns / 1e6 - waits.waited_ms(wall, wall + ns), 0.0) for wall, ns in samples]
    return WireOverhead(sum(measured) / len(measured), sum(less_waits) / len(less_waits))


def main(argv: list[str] | None = None) -> int:
    """`python -m e2e._references URL`: the minimal client of `wire_overhead_ms`; prints
    `[[wall_start_ns, first_byte_ns], ...]` as one JSON line."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    samples = asyncio.run(_first_bytes(args.url, args.requests, args.concurrency))
    sys.stdout.buffer.write(orjson.dumps(samples) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
