"""A `dev-fakes` session: the fakes up, the start command printed, the service driven each time
it registers, and on Ctrl+C a `Shutdown` to it before the fakes stop."""

from __future__ import annotations

import signal
from collections.abc import Callable

import anyio
import structlog
import zmq.asyncio

from aiperf.comms import Addressing
from aiperf.messages import ServiceState, Shutdown
from aiperf.runtime.control_server import ControlServer
from aiperf.testing.devfakes.fixture import Fixture
from aiperf.testing.devfakes.scenarios import Scenario, Target, scenario_for
from aiperf.testing.fake_services import controller_peers
from aiperf.testing.fakes import FakeController

log = structlog.get_logger("aiperf.testing.devfakes")

SHUTDOWN_TIMEOUT_S = 10.0


async def serve(fixture: Fixture, announce: Callable[[], None]) -> int:
    """Run the fakes of `fixture.service_type`'s peers until SIGINT/SIGTERM; `announce` is called
    once they are up (it prints the start command). Returns the exit code (0)."""
    ctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=fixture.config.comms.ipc_dir)
    try:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                control: ControlServer = await tg.start(FakeController(ctx, addressing).run)
                scenario = scenario_for(fixture, ctx, addressing)
                await scenario.start(tg)
                drives = anyio.CancelScope()
                tg.start_soon(_drive_each_registration, Target(control, fixture.service_id), scenario, drives)
                announce()
                async for signum in signals:
                    log.info("dev.stopping", signal=signal.Signals(signum).name)
                    break
                drives.cancel()
                await _shutdown(control, fixture.service_id)
                tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    return 0


async def _drive_each_registration(target: Target, scenario: Scenario, scope: anyio.CancelScope) -> None:
    """Drive the service each time it registers with a new pid (a restart cancels the drive of
    the process before); warn once about services registered under another id."""
    control, driven_pid, warned = target.control, None, set[str]()
    with scope:
        async with anyio.create_task_group() as tg:
            drive = anyio.CancelScope()
            while True:
                for sid in control.services.keys() - {target.service_id} - warned:
                    warned.add(sid)
                    log.warning("dev.unexpected_service", service=sid, expected=target.service_id,
                                hint="start it with the printed --service-id")
                info = control.services.get(target.service_id)
                if info is None or info.pid == driven_pid:
                    await control.wait_changed()
                    continue
                driven_pid = info.pid
                log.info("dev.registered", service=info.service_id, type=str(info.service_type), pid=info.pid,
                         group=info.group_id)
                drive.cancel()
                drive = anyio.CancelScope()
                tg.start_soon(_drive_once, scenario, target, drive)


async def _drive_once(scenario: Scenario, target: Target, scope: anyio.CancelScope) -> None:
    with scope:
        try:
            await scenario.drive(target)
        except Exception:  # a bug in the script: shown, and the fakes stay up for the developer
            log.error("dev.drive_failed", service=target.service_id, exc_info=True)
            return
        log.info("dev.driven", service=target.service_id,
                 hint="Ctrl+C sends it Shutdown; restart it to drive it again")


async def _shutdown(control: ControlServer, service_id: str) -> None:
    info = control.services.get(service_id)
    if info is None or info.state in (ServiceState.STOPPED, ServiceState.FAILED):
        return
    try:
        await control.ask(service_id, Shutdown(request_id="dev-shutdown", reason="dev-fakes stop"),
                          timeout=SHUTDOWN_TIMEOUT_S)
    except Exception as exc:  # gone already, or deaf: the fakes stop anyway
        log.warning("dev.shutdown_unanswered", service=service_id, error=f"{type(exc).__name__}: {exc}")
        return
    log.info("dev.shutdown_sent", service=service_id)


async def serve_controller_fakes(fixture: Fixture, announce: Callable[[], None]) -> int:
    """Run the system-controller's peers (`controller_peers`) for one controller run, until
    SIGINT/SIGTERM. Returns the exit code (0)."""
    ctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=fixture.config.comms.ipc_dir)
    peers = controller_peers(ctx, addressing, fixture.config, dataset_dir=str(fixture.dataset_dir),
                             conversations=len(fixture.conversation_ids))
    try:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                for peer in peers:
                    await tg.start(peer.run)

                async def run_over() -> None:
                    for peer in peers:
                        await peer.stopped.wait()
                    log.info("dev.run_over", commands={p.service_id: p.commands for p in peers},
                             hint="every fake got Shutdown; restart dev-fakes for another controller run")

                tg.start_soon(run_over)
                announce()
                async for signum in signals:
                    log.info("dev.stopping", signal=signal.Signals(signum).name)
                    break
                tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    return 0
