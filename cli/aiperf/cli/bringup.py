"""`aiperf bringup`: every service up as a local process, then a clean stop."""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import anyio

from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, ServiceCounts, dump_run_config
from aiperf.runtime import configure_logging
from aiperf.system_controller.runner import run_cancellable


def run_bringup(*, workers: int, record_processors: int, artifact_dir: str, timeout: float) -> int:
    """Bring the services up and down; prints the verdict and returns its exit code."""
    if workers < 1 or record_processors < 1:
        print("error: --workers and --record-processors must be at least 1", file=sys.stderr)
        return 2
    out = Path(artifact_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:8]
    config = RunConfig(
        run_id=run_id, mode="bringup", artifact_dir=str(out),
        comms=CommsOptions(ipc_dir=tempfile.mkdtemp(prefix=f"aiperf-{run_id}-", dir="/tmp")),
        services=ServiceCounts(workers_per_group=workers, record_processors_per_group=record_processors),
        runtime=RuntimeOptions(registration_timeout_s=timeout, heartbeat_interval_s=0.5),
    )
    config_path = out / "run_config.json"
    dump_run_config(config, config_path)
    configure_logging(service_id="system-controller", level="warning")

    async def go() -> int:
        verdict = await run_cancellable(config, config_path=str(config_path))
        names = ", ".join(verdict.registered)
        print(f"{len(verdict.registered)} services registered: {names}")
        bad = {sid: code for sid, code in verdict.exit_codes.items() if code != 0}
        print(f"exit codes: {'all 0' if not bad else bad}")
        print(f"bring-up {verdict.state}" + (f": {verdict.reason}" if verdict.reason else ""))
        return verdict.exit_code

    return anyio.run(go)
