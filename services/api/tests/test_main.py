"""`main.build` wiring over a real event bus (IPC): the api follows events published upstream."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import anyio
import pytest
import zmq.asyncio

from aiperf.api.main import build
from aiperf.api.service import Api
from aiperf.comms import Addressing, Channel, EventBusProxy, Publisher
from aiperf.config import CommsOptions, RunConfig
from aiperf.messages import ServiceType, SystemState, SystemStateChanged
from aiperf.runtime import ServiceContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    # tmp_path is too long for AF_UNIX paths (108 bytes); keep IPC paths short.
    path = tempfile.mkdtemp(prefix="aia-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_build_follows_the_event_bus(ipc_dir: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIPERF_API_PORT", raising=False)
    monkeypatch.delenv("AIPERF_API_HOST", raising=False)
    monkeypatch.delenv("AIPERF_CONTROLLER_HOST", raising=False)
    config = RunConfig(run_id="r", artifact_dir=str(tmp_path), comms=CommsOptions(ipc_dir=ipc_dir,
                                                                                  tcp_bind_host=None))
    addressing = Addressing(ipc_dir=ipc_dir)
    ctx = zmq.asyncio.Context()
    try:
        proxy = EventBusProxy(ctx, frontend=addressing.bind_endpoints(Channel.EVENT_BUS_FRONTEND),
                              backend=addressing.bind_endpoints(Channel.EVENT_BUS_BACKEND))
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            async with AsyncExitStack() as stack, Publisher(
                    ctx, connect=[addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]) as pub:
                api = await build(ServiceContext(config=config, service_type=ServiceType.API,
                                                 service_id="api", group_id="", zmq=ctx,
                                                 addressing=addressing), stack)
                assert isinstance(api, Api)
                async with anyio.create_task_group() as service_tg:
                    await service_tg.start(api.run)
                    assert api.url.startswith("http://127.0.0.1:")
                    async with aiohttp.ClientSession() as http:
                        # PUB/SUB joins late (the subscription travels through the proxy):
                        # republish until the api shows the state.
                        with anyio.fail_after(10):
                            while api.view.state is None:
                                await pub.publish(SystemStateChanged(state=SystemState.READY))
                                with anyio.move_on_after(0.05):
                                    await api.view.next_change(api.view.version)
                        async with http.get(f"{api.url}/health") as response:
                            assert await response.json() == {"status": "ok", "state": "ready"}
                    service_tg.cancel_scope.cancel()
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)


def test_the_api_imports_no_litestar_until_a_request() -> None:
    """A run nobody asks anything of never builds the app: importing the service's entry point
    imports neither Litestar nor the dashboard (`aiperf.api.service` builds the app lazily)."""
    code = ("import sys, aiperf.api.main\n"
            "print(sorted(m for m in ('litestar', 'aiperf.api.app', 'aiperf.dashboard') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
