"""The system-controller brings up all nine services as real processes and stops them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, ServiceCounts, dump_run_config
from aiperf.messages import ServiceType, SystemState
from aiperf.system_controller.launcher import LocalLauncher, Planned, default_argv
from aiperf.system_controller.runner import run_system

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def make_config(tmp_path: Path, registration_timeout_s: float = 60.0) -> tuple[RunConfig, str]:
    config = RunConfig(
        run_id="it", artifact_dir=str(tmp_path / "artifacts"),
        comms=CommsOptions(ipc_dir=tempfile.mkdtemp(prefix="it-", dir="/tmp")),
        services=ServiceCounts(worker_groups=1, workers_per_group=2, record_processors_per_group=2),
        runtime=RuntimeOptions(heartbeat_interval_s=0.2, registration_timeout_s=registration_timeout_s),
    )
    path = tmp_path / "run_config.json"
    dump_run_config(config, path)
    return config, str(path)


async def test_all_nine_services_register_and_exit_zero(tmp_path: Path) -> None:
    config, path = make_config(tmp_path)
    verdict = await run_system(config, config_path=path)
    assert verdict.state is SystemState.DONE, verdict.reason
    expected_ids = {"event-bus-proxy", "records-manager", "timing-manager", "dataset-manager", "api",
                    "worker-group-manager-g0", "record-processor-g0-0", "record-processor-g0-1",
                    "worker-g0-0", "worker-g0-1"}
    assert set(verdict.registered) == expected_ids
    assert verdict.exit_codes == {sid: 0 for sid in expected_ids}
    assert verdict.exit_code == 0
    types_started = {ServiceType(sid.rsplit("-g", 1)[0]) if "-g" in sid else ServiceType(sid)
                     for sid in expected_ids}
    assert types_started | {ServiceType.SYSTEM_CONTROLLER} == set(ServiceType)


def crashing(service_id: str, code: int) -> object:
    def argv_of(planned: Planned, config_path: str) -> Sequence[str]:
        if planned.service_id == service_id:
            return [sys.executable, "-c",
                    f"import sys; sys.stderr.write('cannot open dataset: disk on fire\\n'); sys.exit({code})"]
        return default_argv(planned, config_path)
    return argv_of


async def test_a_service_crashing_at_start_fails_the_run_naming_it(tmp_path: Path) -> None:
    config, path = make_config(tmp_path)
    launcher = LocalLauncher(config_path=path, log_dir=tmp_path / "logs",
                             argv_of=crashing("dataset-manager", 3))  # type: ignore[arg-type]
    verdict = await run_system(config, config_path=path, launcher=launcher)
    assert verdict.state is SystemState.FAILED
    assert verdict.exit_code != 0
    assert "dataset-manager exited with code 3 before registering" in verdict.reason
    # every other service was stopped: registered ones cleanly over control (exit 0), ones
    # still starting by SIGTERM (0 when their handler was installed, -15 while importing)
    others = {sid: c for sid, c in verdict.exit_codes.items() if sid != "dataset-manager"}
    assert len(others) == 9, others
    assert all(c == 0 for sid, c in others.items() if sid in verdict.registered), others
    assert all(c in (0, -15) for c in others.values()), others


async def test_a_service_that_never_registers_is_named(tmp_path: Path) -> None:
    config, path = make_config(tmp_path, registration_timeout_s=20.0)

    def argv_of(planned: Planned, config_path: str) -> Sequence[str]:
        if planned.service_id == "api":
            return [sys.executable, "-c", "import time\nwhile True: time.sleep(60)"]
        return default_argv(planned, config_path)

    launcher = LocalLauncher(config_path=path, log_dir=tmp_path / "logs", argv_of=argv_of)
    verdict = await run_system(config, config_path=path, launcher=launcher)
    assert verdict.state is SystemState.FAILED
    assert verdict.reason == "services never registered: 1 x api"
    assert verdict.exit_codes["api"] is not None  # it was terminated, not left behind


def test_cli_bringup_exits_zero(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run([sys.executable, "-m", "aiperf.cli", "bringup", "--artifact-dir",
                             str(tmp_path / "bu"), "--workers", "2"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 services registered" in result.stdout
    assert "exit codes: all 0" in result.stdout
