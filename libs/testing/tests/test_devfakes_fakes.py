"""The dev-fakes' parts in-process: the written fixture, the fake services a system-controller
drives, the fake workers a timing-manager serves and the event bus tap. (tests/integration
runs each real service against `aiperf dev-fakes`.)"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import Addressing, Channel, PullSocket, RouterSocket
from aiperf.config import load_run_config
from aiperf.dataset import DatasetReader
from aiperf.messages import (
    Ack,
    BuildDataset,
    CancelCredits,
    Credit,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    Finalize,
    Phase,
    PrepareGroup,
    ProfileConfigure,
    ProfileStart,
    ServiceState,
    ServiceType,
    Shutdown,
    SystemState,
    SystemStateChanged,
    TimePing,
    TimePong,
    ToController,
    WorkerConnected,
)
from aiperf.runtime import CommandError
from aiperf.runtime.control_server import ControlServer
from aiperf.testing.devfakes import parse_args
from aiperf.testing.devfakes.fixture import API_PORT_ENV, CONVERSATIONS, write_fixture
from aiperf.testing.fake_bus import FakeEventBus
from aiperf.testing.fake_services import controller_peers
from aiperf.testing.fake_workers import FakeWorkers

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("service_type", list(ServiceType), ids=str)
def test_the_fixture_is_a_run_config_and_dataset_the_service_can_load(tmp_path: Path,
                                                                       service_type: ServiceType) -> None:
    fixture = write_fixture(service_type, tmp_path / "dev", url="http://127.0.0.1:9", model="m", requests=4,
                            workers=3)
    assert load_run_config(fixture.config_path) == fixture.config
    with DatasetReader(fixture.dataset_dir) as reader:
        assert reader.ids() == fixture.conversation_ids and len(reader) == CONVERSATIONS
    assert fixture.config.benchmark.profiling.requests == 4
    pants, aiperf = fixture.commands()
    assert pants.endswith(" ".join(fixture.flags)) and aiperf.endswith(" ".join(fixture.flags))
    if service_type is ServiceType.SYSTEM_CONTROLLER:
        assert "--external-services" in fixture.flags
        return
    assert fixture.flags[fixture.flags.index("--service-id") + 1] == fixture.service_id
    if service_type in (ServiceType.WORKER, ServiceType.RECORD_PROCESSOR, ServiceType.WORKER_GROUP_MANAGER):
        assert fixture.service_id.startswith(f"{service_type}-g0") and fixture.group_id == "g0"
    assert fixture.config.services.workers_per_group == (3 if service_type is ServiceType.TIMING_MANAGER else 1)
    if service_type is ServiceType.API:
        assert aiperf.startswith(f"{API_PORT_ENV}={fixture.env[API_PORT_ENV]} aiperf service api ")


def test_requests_keeps_its_old_name_and_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--for", "worker", "--credits", "5"]).requests == 5
    with pytest.raises(SystemExit):
        parse_args(["--for", "worker", "--requests", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--for", "scheduler"])
    assert "--for" in capsys.readouterr().err


async def test_controller_peers_register_and_answer_like_the_services(tmp_path: Path, ipc_dir: str,
                                                                      zctx: zmq.asyncio.Context) -> None:
    fixture = write_fixture(ServiceType.SYSTEM_CONTROLLER, tmp_path / "dev", url="http://127.0.0.1:9",
                            model="m", requests=3, workers=1)
    addressing = Addressing(ipc_dir=ipc_dir)
    peers = controller_peers(zctx, addressing, fixture.config, dataset_dir="/data", conversations=5,
                             request_s=0.001)
    async with (RouterSocket[ToController](zctx, decode=ToController, channel="control",
                                           bind=addressing.bind_endpoints(Channel.CONTROL)) as router,
                anyio.create_task_group() as tg):
        control = ControlServer(router)
        await tg.start(control.run)
        for peer in peers:
            await tg.start(peer.run)
        with anyio.fail_after(10):
            await control.wait_registered(fixture.config.services.expected(), timeout=10)
            while any(s.state is not ServiceState.RUNNING for s in control.services.values()):
                await control.wait_changed()

            built = await control.ask("dataset-manager", BuildDataset(request_id="b"), timeout=5)
            assert (built.dataset_dir, built.conversations) == ("/data", 5)
            ready = await control.ask("worker-group-manager-g0", PrepareGroup(request_id="p", dataset_dir="/data"),
                                      timeout=5)
            assert ready.members == ["worker-g0-0", "record-processor-g0-0"] and ready.group_id == "g0"
            for sid in control.services.keys() - {"dataset-manager", "worker-group-manager-g0"}:
                configured = await control.ask(sid, ProfileConfigure(request_id=f"c-{sid}", dataset_dir="/data"),
                                               timeout=5)
                assert isinstance(configured, Ack)
            finished = await control.ask("timing-manager", ProfileStart(request_id="s"), timeout=5)
            profiling = finished.accounting.phases[Phase.PROFILING]
            assert (profiling.issued, profiling.ok, finished.accounting.cancelled) == (3, 3, False)
            finalized = await control.ask("records-manager", Finalize(request_id="f", accounting=finished.accounting),
                                          timeout=5)
            assert finalized.balanced and finalized.request_count == 3
            assert Path(fixture.config.artifact_dir).is_dir()  # created at ProfileConfigure, as the real one
            with pytest.raises(CommandError, match="does not handle BuildDataset") as refused:
                await control.ask("api", BuildDataset(request_id="x"), timeout=5)
            assert refused.value.error_type == "UnknownCommand"

            for sid in list(control.services):
                await control.ask(sid, Shutdown(request_id=f"q-{sid}"), timeout=5)
            for peer in peers:
                await peer.stopped.wait()
            while any(s.state is not ServiceState.STOPPED for s in control.services.values()):
                await control.wait_changed()
        tg.cancel_scope.cancel()


async def test_fake_workers_handshake_then_return_every_credit(ipc_dir: str, zctx: zmq.asyncio.Context) -> None:
    addressing = Addressing(ipc_dir=ipc_dir)
    workers = FakeWorkers(zctx, addressing, count=2, latency_s=60.0)
    async with (RouterSocket[TimePing](zctx, decode=CreditUpstream, channel="credits",
                                       bind=addressing.bind_endpoints(Channel.CREDITS)) as credits,
                PullSocket[CreditReturnChannel](zctx, decode=CreditReturnChannel, channel="credit_returns",
                                                bind=addressing.bind_endpoints(Channel.CREDIT_RETURNS)) as returns,
                anyio.create_task_group() as tg):
        await tg.start(workers.run)

        async def pong() -> None:
            while True:
                peer, ping = await credits.recv()
                await credits.send(peer, TimePong(seq=ping.seq, ping_sent_at_ns=ping.sent_at_ns, received_at_ns=1))

        tg.start_soon(pong)
        tg.start_soon(workers.announce)
        with anyio.fail_after(10):
            hellos = [await returns.recv(), await returns.recv()]
            assert hellos == [WorkerConnected(worker_id="worker-g0-0", group_id="g0"),
                              WorkerConnected(worker_id="worker-g0-1", group_id="g0")]
            now = time.perf_counter_ns()
            await credits.send(b"worker-g0-1", Credit(phase=Phase.PROFILING, num=0, conversation_id="c",
                                                      issued_at_ns=now, should_cancel=True, cancel_after_ns=1))
            first = await returns.recv()
            assert isinstance(first, CreditReturn) and (first.num, first.cancelled, first.ok) == (0, True, False)
            await credits.send(b"worker-g0-0", Credit(phase=Phase.PROFILING, num=1, conversation_id="c",
                                                      issued_at_ns=now))
            await credits.send(b"worker-g0-0", CancelCredits(phase=Phase.PROFILING))  # latency is 60 s
            second = await returns.recv()
            assert isinstance(second, CreditReturn)
            assert (second.worker_id, second.num, second.cancelled) == ("worker-g0-0", 1, True)
        assert [r.num for r in workers.returned] == [0, 1]
        tg.cancel_scope.cancel()


async def test_the_event_tap_sees_what_it_publishes_through_the_proxy(ipc_dir: str,
                                                                      zctx: zmq.asyncio.Context) -> None:
    async with anyio.create_task_group() as tg:
        tap = await tg.start(FakeEventBus(zctx, Addressing(ipc_dir=ipc_dir)).run)
        event = SystemStateChanged(state=SystemState.READY, reason="probe")
        await tap.publish_until_seen(event, timeout=10)
        assert await tap.wait_for(lambda e: isinstance(e, SystemStateChanged), timeout=1) == event
        tg.cancel_scope.cancel()
