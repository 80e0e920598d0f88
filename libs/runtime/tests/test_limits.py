"""`aiperf.runtime.limits`, in child processes started with a low open-file limit (the test
process's own limit is left alone)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from aiperf.config import Benchmark, CommsOptions, ConcurrencyPhase, PoissonPhase, RunConfig, ServiceCounts
from aiperf.runtime.limits import connections_per_worker

CHILD = """
import resource, sys
from aiperf.runtime import UserError
from aiperf.runtime.limits import ensure_open_files, raise_open_files_limit
print(*raise_open_files_limit())
try:
    print(ensure_open_files(int(sys.argv[1]), hint="add workers"))
except UserError as exc:
    print("UserError:", exc)
"""


def _run(connections: int, soft: int, hard: int) -> list[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    out = subprocess.run([sys.executable, "-c", CHILD, str(connections)], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, preexec_fn=limit,
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.splitlines()


def test_the_soft_limit_rises_to_the_hard_one() -> None:
    assert _run(100, 256, 2048) == ["2048 2048", "2048"]


def test_a_hard_limit_too_low_is_one_clear_line() -> None:
    raised, error = _run(5000, 256, 1024)
    assert raised == "1024 1024"
    assert error.startswith("UserError: each worker process needs about 5256 open files (5000 connections), "
                            "but the open-file limit is 1024 (hard limit 1024): raise it")
    assert error.endswith("or add workers") and "\n" not in error


def test_connections_per_worker_is_a_share_of_the_largest_concurrency() -> None:
    def config(*phases: object, workers: int) -> RunConfig:
        return RunConfig(run_id="t", mode="profile", comms=CommsOptions(ipc_dir="/tmp"),
                         services=ServiceCounts(workers_per_group=workers),
                         benchmark=Benchmark(models=["m"], phases=list(phases)))

    warmup = ConcurrencyPhase(name="warmup", concurrency=100, requests=100)
    profiling = ConcurrencyPhase(concurrency=15_000, requests=30_000)
    assert connections_per_worker(config(warmup, profiling, workers=4)) == 3750 + 937
    assert connections_per_worker(config(profiling, workers=1)) == 15_000 + 3750
    assert connections_per_worker(config(PoissonPhase(rate=10.0, requests=10), workers=2)) == 0  # uncapped
