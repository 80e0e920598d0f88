"""`aiperf profile`: one benchmark on this machine, every service a local process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import zmq.asyncio

from aiperf.config import (
    CommsOptions,
    ProfileOptions,
    RunConfig,
    RuntimeOptions,
    ServiceCounts,
    dump_run_config,
)
from aiperf.runtime import addressing_of, configure_logging
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.report import report
from aiperf.system_controller.runner import run_cancellable

EXIT_USER_ERROR = 2


def default_workers(concurrency: int | None) -> int:
    """AIPerf's default: max(1, min(int(cpus * 0.75) - 1, 32)), capped at the concurrency."""
    workers = max(1, min(int((os.cpu_count() or 1) * 0.75) - 1, 32))
    return min(workers, concurrency) if concurrency else workers


def reachable(url: str, timeout_s: float = 3.0) -> str | None:
    """None when a TCP connection to the URL's host:port opens, else why not."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def run_profile(options: ProfileOptions, *, headers: dict[str, str], api_key: str | None,
                artifact_dir: str, workers_max: int | None, record_processors: int | None,
                t0_wall_ns: int, log_level: str = "warning") -> int:
    """Validate, start the services, run the benchmark, print the results; the exit code."""
    problems = options.validate()
    if workers_max is not None and workers_max < 1:
        problems.append(f"--workers-max {workers_max}: must be at least 1")
    if record_processors is not None and record_processors < 1:
        problems.append(f"--record-processors {record_processors}: must be at least 1")
    if options.dataset.get("input_file") and not Path(options.dataset["input_file"]).exists():
        problems.append(f"--input-file {options.dataset['input_file']}: no such file or folder")
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_USER_ERROR
    if (why := reachable(options.url)) is not None:
        print(f"error: cannot reach {options.url} ({why}); is the server running? (--url)", file=sys.stderr)
        return EXIT_USER_ERROR
    out = Path(artifact_dir).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --artifact-dir {artifact_dir}: {exc.strerror}", file=sys.stderr)
        return EXIT_USER_ERROR
    workers = workers_max or default_workers(options.concurrency)
    run_id = uuid.uuid4().hex[:8]
    ipc_dir = tempfile.mkdtemp(prefix=f"aiperf-{run_id}-", dir="/tmp")
    config = RunConfig(
        run_id=run_id, mode="profile", artifact_dir=str(out), t0_wall_ns=t0_wall_ns, profile=options,
        comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host="127.0.0.1"),
        services=ServiceCounts(workers_per_group=workers,
                               record_processors_per_group=record_processors or max(1, workers // 4)),
        runtime=RuntimeOptions(heartbeat_interval_s=1.0, log_level=log_level),
    )
    config_path = out / "run_config.json"
    dump_run_config(config, config_path)
    if api_key:
        os.environ["AIPERF_API_KEY"] = api_key
    if headers:
        os.environ["AIPERF_HEADERS_JSON"] = json.dumps(headers)
    configure_logging(service_id="system-controller", level=log_level)
    try:
        return anyio.run(_run, config, str(config_path), backend_options={"use_uvloop": True})
    finally:
        shutil.rmtree(ipc_dir, ignore_errors=True)


async def _run(config: RunConfig, config_path: str) -> int:
    assert config.profile is not None
    profile = config.profile
    started = anyio.Event()

    async def on_started() -> None:
        started.set()

    driver = ProfileDriver(config=config, on_started=on_started)
    ctx = zmq.asyncio.Context()
    try:
        async with anyio.create_task_group() as tg:
            if profile.ui == "simple":
                from aiperf.cli.progress import show_progress

                tg.start_soon(lambda: show_progress(
                    ctx, addressing_of(config), total=profile.effective_request_count,
                    duration_s=profile.benchmark_duration, started=started))
            verdict = await run_cancellable(config, config_path=config_path, driver=driver,
                                            on_cancel=_say_cancelling)
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    return report(config, verdict, driver.outcome)


def _say_cancelling() -> None:
    print("\ncancelling: stopping the benchmark and writing partial results "
          "(Ctrl+C again to force)", file=sys.stderr)
