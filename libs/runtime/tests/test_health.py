"""The health endpoints: /healthz while the loop runs and the service has not failed, /readyz
while it runs; served by every service process when AIPERF_HEALTH_PORT is set."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from aiperf.runtime.health import Health, HealthServer

pytestmark = pytest.mark.anyio


async def _get(port: int, path: str) -> int:
    stream = await anyio.connect_tcp("127.0.0.1", port)
    async with stream:
        await stream.send(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        with anyio.fail_after(5):
            while chunk := await _receive(stream):
                data += chunk
    return int(data.split()[1])


async def _receive(stream: anyio.abc.ByteStream) -> bytes:
    try:
        return await stream.receive()
    except anyio.EndOfStream:
        return b""


@pytest.mark.parametrize(("health", "healthz", "readyz"), [
    (Health(alive=True, ready=True), 200, 200),
    (Health(alive=True, ready=False), 200, 503),
    (Health(alive=False, ready=False), 503, 503),
])
async def test_the_probes_follow_the_health(health: Health, healthz: int, readyz: int) -> None:
    server = HealthServer(lambda: health, host="127.0.0.1", port=0)
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        assert (await _get(server.port, "/healthz"), await _get(server.port, "/readyz")) == (healthz, readyz)
        assert await _get(server.port, "/nope") == 404
        tg.cancel_scope.cancel()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_service_process_serves_its_health_port(tmp_path: Path) -> None:
    from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, dump_run_config

    port = _free_port()
    config = tmp_path / "run_config.json"
    dump_run_config(RunConfig(run_id="h", comms=CommsOptions(ipc_dir=str(tmp_path), tcp_bind_host=None),
                              runtime=RuntimeOptions(heartbeat_interval_s=0.2)), config)
    demo = Path(__file__).parent / "_demo_service.py"
    env = {**os.environ, "AIPERF_HEALTH_PORT": str(port), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(demo), "ok", str(config), "demo-1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(20):
            while True:  # ready once running (registration is queued until a controller binds)
                try:
                    if await _get(port, "/readyz") == 200:
                        break
                except OSError:
                    pass
                await anyio.sleep(0.05)
        assert await _get(port, "/healthz") == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
