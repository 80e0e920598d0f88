"""`aiperf profile`: one benchmark on this machine, every service a local process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from aiperf.comms import CurveKeys, load_curve, zmq_context
from aiperf.config import (
    Benchmark,
    CommsOptions,
    ConfigError,
    FileDataset,
    HttpOptions,
    MetricsOptions,
    RunConfig,
    RuntimeOptions,
    Secrets,
    ServiceCounts,
    dump_run_config,
)
from aiperf.config.user_files import write_user_files
from aiperf.runtime import UserError, addressing_of, configure_logging
from aiperf.runtime.limits import WORKER_HINT, connections_per_worker, ensure_open_files
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.report import report
from aiperf.system_controller.runner import run_cancellable
from aiperf.system_controller.startup_trace import StartupTrace

if TYPE_CHECKING:
    from aiperf.cli.dashboard import Dashboard
    from aiperf.zygote_process import ZygoteProcess

EXIT_USER_ERROR = 2


LOCAL_CURVE_ENV = "AIPERF_CURVE"
"""`1` turns CURVE on for a local `aiperf profile` (Kubernetes runs always use it)."""


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


def service_counts(benchmark: Benchmark) -> ServiceCounts:
    """One group of `runtime.workers` workers (default: `default_workers` of the profiling
    concurrency) and `runtime.record_processors` record-processors (default: workers / 4)."""
    runtime = benchmark.runtime
    workers = runtime.workers or default_workers(benchmark.profiling.concurrency)
    return ServiceCounts(workers_per_group=workers,
                         record_processors_per_group=runtime.record_processors or max(1, workers // 4))


def local_curve_keys(ipc_dir: str) -> str | None:
    """With `AIPERF_CURVE=1`, a fresh per-run CURVE key pair written into the run's private
    IPC folder (0700, removed with it) and that folder's path; else None (no CURVE: local
    channels are IPC files under a private folder and TCP on 127.0.0.1)."""
    if os.environ.get(LOCAL_CURVE_ENV, "") != "1":
        return None
    keys_dir = os.path.join(ipc_dir, "curve")
    CurveKeys.generate().write(keys_dir)
    return keys_dir


def run_profile(benchmark: Benchmark, *, secrets: Secrets, t0_wall_ns: int, log_level: str = "warning",
                auto_plot: bool = False, profile_startup: bool = False,
                zygote: ZygoteProcess | None = None) -> int:
    """Check what only this machine can tell (the input file exists, the server answers unless
    `--wait-for-model-timeout` waits for it, the artifact folder can be made), start the services, run the benchmark, print the results;
    returns the exit code. `benchmark` is already validated. `auto_plot`: then plot the exports
    (`aiperf.cli.plot.auto_plot`) when a summary was written; that never changes the code.
    `profile_startup` prints where the time went (`StartupTrace`) on stderr at the end.
    `zygote`: one the command started early, adopted by the run (the caller closes it)."""
    trace = StartupTrace(t0_wall_ns) if profile_startup else None
    if trace is not None:
        trace.mark("cli: flags parsed, benchmark built")
    dataset = benchmark.dataset
    path = dataset.path if isinstance(dataset, FileDataset) else None
    if path is not None and not Path(path).expanduser().exists():
        print(f"error: --input-file {path}: no such file or folder", file=sys.stderr)
        return EXIT_USER_ERROR
    waits = benchmark.endpoint.wait_for_model_timeout > 0  # --wait-for-model-timeout: the run waits for it
    for url in dict.fromkeys(u.rstrip("/") for u in benchmark.endpoint.urls) if not waits else ():
        if (why := reachable(url)) is not None:
            print(f"error: cannot reach {url} ({why}); is the server running? (--url)", file=sys.stderr)
            return EXIT_USER_ERROR
    out = Path(benchmark.artifacts.dir).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --artifact-dir {benchmark.artifacts.dir}: {exc.strerror}", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        write_user_files(benchmark, out)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        metrics, http = MetricsOptions.from_env(os.environ), HttpOptions.from_env(os.environ)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    run_id = uuid.uuid4().hex[:8]
    ipc_dir = tempfile.mkdtemp(prefix=f"aiperf-{run_id}-", dir="/tmp")
    # The dataset files are working files, not results: they live (and die) with the IPC folder
    # unless asked to be kept in the artifacts.
    keep = benchmark.artifacts.keep_dataset
    dataset_dir = str(out / "dataset") if keep else os.path.join(ipc_dir, "dataset")
    config = RunConfig(
        run_id=run_id, mode="profile", artifact_dir=str(out), t0_wall_ns=t0_wall_ns, benchmark=benchmark,
        comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host="127.0.0.1",
                           curve_keys_dir=local_curve_keys(ipc_dir)), services=service_counts(benchmark),
        runtime=RuntimeOptions(heartbeat_interval_s=1.0, log_level=log_level), dataset_dir=dataset_dir,
        metrics=metrics, http=http,
    )
    try:  # the workers inherit this process's hard limit: one line now, not a lost worker later
        ensure_open_files(connections_per_worker(config), hint=WORKER_HINT)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    config_path = out / "run_config.json"
    dump_run_config(config, config_path)
    if secrets.api_key:
        os.environ["AIPERF_API_KEY"] = secrets.api_key
    if secrets.headers:
        os.environ["AIPERF_HEADERS_JSON"] = json.dumps(secrets.headers)
    configure_logging(service_id="system-controller", level=log_level)
    if trace is not None:
        trace.mark("cli: run_config.json written")
    dashboard = None
    if benchmark.runtime.ui == "dashboard":
        from aiperf.cli.dashboard import Dashboard

        dashboard = Dashboard(config=config)
        dashboard.capture_logs()
    try:
        code = anyio.run(_run, config, str(config_path), dashboard, trace, zygote,
                         backend_options={"use_uvloop": True})
    finally:
        shutil.rmtree(ipc_dir, ignore_errors=True)
        if trace is not None:
            numpy = "yes" if "numpy" in sys.modules else "no"
            trace.mark(f"cli: done ({time.process_time():.2f} s CPU in the aiperf process, numpy imported: {numpy})")
            trace.render()
    if auto_plot and (out / "profile_export_aiperf.json").is_file():
        from aiperf.cli.plot import auto_plot as plot_exports

        plot_exports(out)
    return code


async def _run(config: RunConfig, config_path: str, dashboard: Dashboard | None,
               trace: StartupTrace | None = None, zygote: ZygoteProcess | None = None) -> int:
    benchmark = config.benchmark
    started = anyio.Event()

    async def on_started() -> None:
        started.set()

    driver = ProfileDriver(config=config, on_started=on_started)
    with zmq_context(load_curve(config.comms.curve_keys_dir)) as ctx:
        async with anyio.create_task_group() as tg:
            if benchmark.runtime.ui == "simple":
                from aiperf.cli.progress import show_progress

                tg.start_soon(lambda: show_progress(
                    ctx, addressing_of(config), total=benchmark.profiling.requests,
                    duration_s=benchmark.profiling.duration, started=started))
            elif dashboard is not None:
                tg.start_soon(dashboard.show)
            verdict = await run_cancellable(config, config_path=config_path, driver=driver,
                                            on_cancel=_say_cancelling, tracker=dashboard, trace=trace,
                                            zygote=zygote)
            tg.cancel_scope.cancel()
    if trace is not None:
        trace.mark("services stopped, zygote gone")
        results = driver.outcome.results
        if results is not None and results.startup_s is not None:
            trace.mark("first request sent", config.t0_wall_ns + int(results.startup_s * 1e9))
    return report(config, verdict, driver.outcome)


def _say_cancelling() -> None:
    print("\ncancelling: stopping the benchmark and writing partial results "
          "(Ctrl+C again to force)", file=sys.stderr)
