"""`run_service` in real processes against a real control ROUTER."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import Addressing, Channel, RouterSocket
from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, dump_run_config
from aiperf.messages import Ack, Command, ProfileStart, ServiceState, Shutdown, ToController, WorkerLost
from aiperf.runtime import CommandError
from aiperf.runtime.control_server import ControlServer

DEMO = Path(__file__).with_name("_demo_service.py")
pytestmark = pytest.mark.anyio


class Harness:
    def __init__(self, control: ControlServer, config_path: Path) -> None:
        self.control, self.config_path = control, config_path

    async def start(self, mode: str, service_id: str = "demo-1") -> anyio.abc.Process:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        return await anyio.open_process(
            [sys.executable, str(DEMO), mode, str(self.config_path), service_id],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    async def wait_state(self, service_id: str, state: ServiceState) -> None:
        with anyio.fail_after(20):
            while (info := self.control.services.get(service_id)) is None or info.state is not state:
                await self.control.wait_changed()


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    ipc_dir = tempfile.mkdtemp(prefix="rt-", dir="/tmp")
    config = RunConfig(run_id="t", comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       runtime=RuntimeOptions(heartbeat_interval_s=0.05))
    config_path = Path(ipc_dir) / "run_config.json"
    dump_run_config(config, config_path)
    ctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=ipc_dir)
    async with RouterSocket[ToController](ctx, decode=ToController, channel="control",
                                          bind=addressing.bind_endpoints(Channel.CONTROL)) as router:
        control = ControlServer(router)
        async with anyio.create_task_group() as tg:
            await tg.start(control.run)
            yield Harness(control, config_path)
            tg.cancel_scope.cancel()
    ctx.destroy(linger=0)


class Teleport(Command[Ack], frozen=True, kw_only=True):
    """A command no service build knows (a newer controller's, say)."""


async def test_registers_heartbeats_answers_and_stops_on_shutdown(harness: Harness) -> None:
    proc = await harness.start("ok")
    await harness.wait_state("demo-1", ServiceState.RUNNING)
    info = harness.control.services["demo-1"]
    assert info.pid == proc.pid
    seen = info.last_seen
    with anyio.fail_after(10):
        while harness.control.services["demo-1"].last_seen == seen:  # a heartbeat arrives
            await harness.control.wait_changed()
    reply = await harness.control.ask("demo-1", WorkerLost(request_id="r1", worker_id="w-1"), timeout=10)
    assert reply.lost == 3
    with pytest.raises(CommandError, match="cannot profilestart") as refused:
        await harness.control.ask("demo-1", ProfileStart(request_id="r2"), timeout=10)
    assert refused.value.error_type == "UnknownCommand"
    with pytest.raises(CommandError, match="cannot decode command 'teleport'") as unknown:
        await harness.control.ask("demo-1", Teleport(request_id="r2b"), timeout=10)
    assert unknown.value.error_type == "UnknownCommand"
    assert harness.control.services["demo-1"].state is ServiceState.RUNNING  # still serving
    await harness.control.ask("demo-1", Shutdown(request_id="r3"), timeout=10)
    with anyio.fail_after(20):
        assert await proc.wait() == 0
    await harness.wait_state("demo-1", ServiceState.STOPPED)
    assert len(harness.control._pending) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_means_graceful_stop(harness: Harness, signum: signal.Signals) -> None:
    proc = await harness.start("ok")
    await harness.wait_state("demo-1", ServiceState.RUNNING)
    proc.send_signal(signum)
    with anyio.fail_after(20):
        assert await proc.wait() == 0
    await harness.wait_state("demo-1", ServiceState.STOPPED)


async def test_crash_at_start_exits_1_and_reports_failed(harness: Harness) -> None:
    proc = await harness.start("crash-at-start")
    with anyio.fail_after(20):
        assert await proc.wait() == 1
    await harness.wait_state("demo-1", ServiceState.FAILED)
    assert "boom at start" in harness.control.services["demo-1"].error


async def test_user_error_exits_2_with_one_line(harness: Harness) -> None:
    proc = await harness.start("user-error")
    with anyio.fail_after(20):
        assert await proc.wait() == 2
    await harness.wait_state("demo-1", ServiceState.FAILED)
    assert harness.control.services["demo-1"].error == "--input-file data.jsonl: no such file"
    assert proc.stderr is not None
    err = (await proc.stderr.receive()).decode()
    assert "Traceback" not in err


async def test_service_that_finishes_stops_cleanly(harness: Harness) -> None:
    proc = await harness.start("finish")
    with anyio.fail_after(20):
        assert await proc.wait() == 0
    await harness.wait_state("demo-1", ServiceState.STOPPED)


async def test_forged_replies_and_foreign_registrations_are_dropped() -> None:
    import shutil
    import tempfile

    from aiperf.comms import Addressing, Channel, DealerSocket, RouterSocket
    from aiperf.messages import CreditsLost, Register, ServiceType, ToService
    from aiperf.runtime.control_server import ControlServer

    ctx = zmq.asyncio.Context()
    ipc_dir = tempfile.mkdtemp(prefix="aip-", dir="/tmp")
    addressing = Addressing(ipc_dir=ipc_dir)
    try:
        async with (RouterSocket[ToController](ctx, decode=ToController, channel="control",
                                               bind=addressing.bind_endpoints(Channel.CONTROL)) as router,
                    DealerSocket[ToService](ctx, identity="worker-g0-0", decode=ToService, channel="control",
                                            connect=[addressing.connect_endpoint(Channel.CONTROL)]) as worker,
                    DealerSocket[ToService](ctx, identity="intruder", decode=ToService, channel="control",
                                            connect=[addressing.connect_endpoint(Channel.CONTROL)]) as intruder,
                    anyio.create_task_group() as tg):
            control = ControlServer(router, planned={"worker-g0-0": ServiceType.WORKER})
            await tg.start(control.run)
            with anyio.fail_after(10):
                await intruder.send(Register(service_id="worker-g0-0", service_type=ServiceType.WORKER, pid=1))
                await intruder.send(Register(service_id="intruder", service_type=ServiceType.WORKER, pid=1))
                await worker.send(Register(service_id="worker-g0-0", service_type=ServiceType.WORKER, pid=2))
                while "worker-g0-0" not in control.services:
                    await control.wait_changed()
                assert set(control.services) == {"worker-g0-0"} and control.services["worker-g0-0"].pid == 2
                request_id = control.new_request_id("lost")
                assert request_id.count("-") == 2 and len(request_id.rsplit("-", 1)[1]) == 12  # not guessable

                async def answer() -> None:
                    command = await worker.recv()
                    await intruder.send(CreditsLost(request_id=command.request_id, service_id="worker-g0-0", lost=99))
                    await worker.send(CreditsLost(request_id=command.request_id, service_id="worker-g0-0", lost=1))

                tg.start_soon(answer)
                reply = await control.ask("worker-g0-0", WorkerLost(request_id=request_id, worker_id="w"), timeout=5)
            assert reply.lost == 1  # the intruder's forged reply did not settle the ask
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
        shutil.rmtree(ipc_dir, ignore_errors=True)
