"""`run_service` with the run's CURVE keys: a service process registers and is driven over an
authenticated control channel; unreadable key files exit 2 with one line, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from aiperf.comms import Addressing, Channel, CurveKeys, RouterSocket, zmq_context
from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, dump_run_config
from aiperf.messages import ServiceState, Shutdown, ToController
from aiperf.runtime.control_server import ControlServer

DEMO = Path(__file__).with_name("_demo_service.py")
pytestmark = pytest.mark.anyio


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="rtc-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _start(config_path: Path) -> anyio.abc.Process:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("AIPERF_CURVE_KEYS_DIR", None)
    return await anyio.open_process([sys.executable, str(DEMO), "ok", str(config_path), "demo-1"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _config(ipc_dir: str, keys_dir: str) -> Path:
    config = RunConfig(run_id="t", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None,
                                                      curve_keys_dir=keys_dir),
                       runtime=RuntimeOptions(heartbeat_interval_s=0.05))
    path = Path(ipc_dir) / "run_config.json"
    dump_run_config(config, path)
    return path


async def test_a_service_registers_and_stops_over_curve(ipc_dir: str) -> None:
    keys = CurveKeys.generate()
    keys.write(Path(ipc_dir) / "curve")
    config_path = _config(ipc_dir, str(Path(ipc_dir) / "curve"))
    with zmq_context(keys) as ctx:
        async with RouterSocket[ToController](ctx, decode=ToController, channel="control",
                                              bind=Addressing(ipc_dir=ipc_dir).bind_endpoints(
                                                  Channel.CONTROL)) as router:
            control = ControlServer(router)
            async with anyio.create_task_group() as tg:
                await tg.start(control.run)
                proc = await _start(config_path)
                with anyio.fail_after(20):
                    while (info := control.services.get("demo-1")) is None or \
                            info.state is not ServiceState.RUNNING:
                        await control.wait_changed()
                await control.ask("demo-1", Shutdown(request_id="r1"), timeout=10)
                with anyio.fail_after(20):
                    assert await proc.wait() == 0
                tg.cancel_scope.cancel()


async def test_missing_key_files_exit_2_with_one_line(ipc_dir: str) -> None:
    proc = await _start(_config(ipc_dir, str(Path(ipc_dir) / "absent")))
    with anyio.fail_after(20):
        assert await proc.wait() == 2
    assert proc.stderr is not None
    err = b""
    async for chunk in proc.stderr:
        err += chunk
    text = err.decode()
    assert "curve key file" in text and "not found" in text and "Traceback" not in text
