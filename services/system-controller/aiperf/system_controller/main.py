"""Entry point of the system-controller process (its pex and container image).

Locally the `aiperf` CLI runs the controller in-process instead; this entry serves
Kubernetes (where the other services are containers that only need to register) and
developers running it by hand: `python -m aiperf.system_controller.main --config run_config.json`.
With `mode: profile` it drives the benchmark and prints the same report as `aiperf profile`;
otherwise it brings the services up and down. In operator mode (`AIPERF_JOB_NAME`,
`AIPERF_JOB_NAMESPACE`, `AIPERF_JOB_UID` set by the operator) it also pushes the run's part of
the AIPerfJob's status (`job_status`).

To debug the controller alone, start fakes of the eight other services first
(`aiperf dev-fakes --for system-controller`) and run it with `--external-services`: it then
starts no process and drives the fakes that registered, as in Kubernetes.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import anyio

from aiperf.config import ConfigError, RunConfig, load_run_config
from aiperf.config.markers import SERVER_METRICS_READY_MARKER
from aiperf.config.user_files import write_user_files
from aiperf.kube.containers import STARTUP_BUDGET_S
from aiperf.runtime import EXIT_USER_ERROR, configure_logging
from aiperf.runtime.health import HEALTH_PORT_ENV, Health, HealthServer
from aiperf.servermetrics.export import JSON_NAME
from aiperf.system_controller.job_status import reporting
from aiperf.system_controller.launcher import NoLauncher
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.report import report, write_end_marker
from aiperf.system_controller.runner import run_cancellable

EXPORT_WAIT_S = 15.0
"""Kubernetes: how long the controller waits for the server-metrics-manager's export before it
writes the results-ready marker anyway."""
SERVER_METRICS_START_WAIT_S = float(STARTUP_BUDGET_S)
"""Kubernetes: how long the controller waits for the server-metrics-manager container to follow
the event bus before it starts the first phase anyway (the container's own startup budget)."""


def main(argv: list[str] | None = None) -> int:
    """Run the controller for `--config`; the exit code is the run's verdict."""
    args_in = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="system-controller", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="path of run_config.json")
    parser.add_argument("--service-id", default="system-controller")
    parser.add_argument("--group-id", default="")
    parser.add_argument("--external-services", action="store_true",
                        help="start no service process: wait for services started elsewhere (by hand, "
                             "or `aiperf dev-fakes --for system-controller`) to register")
    args = parser.parse_args(args_in)
    try:
        config = load_run_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    configure_logging(service_id=args.service_id, level=config.runtime.log_level)

    if (problem := write_cluster_user_files(config)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USER_ERROR

    async def go() -> int:
        scrapes = config.kubernetes and config.benchmark.server_metrics.enabled
        driver = ProfileDriver(config=config, before_start=(
            partial(wait_for_server_metrics, Path(config.artifact_dir)) if scrapes else None)) \
            if config.mode == "profile" else None
        launcher = NoLauncher() if args.external_services else None
        async with reporting(config, os.environ) as tracker, anyio.create_task_group() as tg:
            if port := os.environ.get(HEALTH_PORT_ENV):  # its container's probes (Kubernetes)
                await tg.start(HealthServer(lambda: Health(alive=True, ready=True), port=int(port)).run)
            verdict = await run_cancellable(config, config_path=args.config, driver=driver, launcher=launcher,
                                            tracker=tracker)
            if tracker is not None:
                tracker.finish(verdict, driver.outcome if driver is not None else None)
            tg.cancel_scope.cancel()
        if driver is not None:
            if scrapes:
                await _wait_for_export(Path(config.artifact_dir) / JSON_NAME)
            code = report(config, verdict, driver.outcome)
            write_end_marker(config, verdict, code)  # last: the results sidecar then knows the run is over
            return code
        print(f"run {verdict.state}: {verdict.reason}" if verdict.reason else f"run {verdict.state}",
              file=sys.stderr)
        return verdict.exit_code

    return anyio.run(go, backend_options={"use_uvloop": True})


def write_cluster_user_files(config: RunConfig) -> str | None:
    """A cluster run's `artifacts.user_files`, written into its artifacts volume before it starts
    (`job_name` is the AIPerfJob's name; locally `aiperf profile` writes them); the problem in
    one line when one cannot be written."""
    if not (config.kubernetes and config.mode == "profile"):
        return None
    try:
        write_user_files(config.benchmark, config.artifact_dir, job_name=config.run_id)
    except ConfigError as exc:
        return str(exc)
    return None


async def wait_for_server_metrics(artifacts: Path, wait_s: float = SERVER_METRICS_START_WAIT_S) -> bool:
    """Kubernetes: wait (at most `wait_s`) until the server-metrics-manager container follows the
    event bus and took its baseline scrape (`SERVER_METRICS_READY_MARKER` in `artifacts`), so it
    sees the phases from their start even when it came up after the other services; True once
    it does, False (after a warning) when it never came: the run goes on without its figures."""
    marker = artifacts / SERVER_METRICS_READY_MARKER
    with anyio.move_on_after(wait_s):
        while not marker.exists():
            await anyio.sleep(0.1)
        return True
    print(f"warning: the server-metrics-manager container did not start within {wait_s:g}s; "
          "the run starts without its baseline", file=sys.stderr)
    return False


async def _wait_for_export(path: Path) -> None:
    """Kubernetes: the server-metrics-manager container writes its export when the profiling
    phase completes; give it `EXPORT_WAIT_S` to land before the results-ready marker."""
    with anyio.move_on_after(EXPORT_WAIT_S):
        while not path.exists():
            await anyio.sleep(0.2)
        return
    print(f"warning: no {path.name} from the server-metrics-manager container within {EXPORT_WAIT_S:g}s",
          file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
