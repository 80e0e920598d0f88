"""The profile driver configures in order: dataset, then each group's dataset copy, then the
group's workers/record-processors with that copy (docs/run-protocol.md)."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from aiperf.config import Benchmark, CommsOptions, ConcurrencyPhase, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.messages import (
    Ack,
    BuildDataset,
    Command,
    DatasetBuilt,
    Finalize,
    Finalized,
    GroupReady,
    PrepareGroup,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    Reply,
    RunAccounting,
    ServiceType,
    Shutdown,
    SystemState,
)
from aiperf.runtime import CommandError
from aiperf.runtime.control_server import ControlServer
from aiperf.system_controller.profile_driver import ProfileDriver
from tests._sc_fakes import Answer, FakeRouter, group_of

pytestmark = pytest.mark.anyio

COUNTS = ServiceCounts(worker_groups=2, workers_per_group=2, last_group_workers=1,
                       record_processors_per_group=1)
SHARED = "/aiperf/artifacts/dataset"


def config(kubernetes: bool) -> RunConfig:
    return RunConfig(run_id="r", mode="profile", comms=CommsOptions(ipc_dir="/tmp"), services=COUNTS,
                     runtime=RuntimeOptions(command_timeout_s=5, registration_timeout_s=5),
                     kubernetes=kubernetes)


class Script:
    """Scripted services: the worker-group-managers answer only when `release` is set."""

    def __init__(self, router: FakeRouter, *, wgm_fails: str = "") -> None:
        self.router, self.wgm_fails = router, wgm_fails
        self.held: list[tuple[str, Command]] = []

    def answer(self, sid: str, command: Command[Any]) -> Answer:
        match command:
            case PrepareGroup():
                self.held.append((sid, command))
                return None
        return answer_plainly(sid, command)

    def release(self) -> None:
        for sid, command in self.held:
            outcome: Reply | Exception = (
                RuntimeError("dataset not available") if sid == self.wgm_fails
                else ready(sid, f"/aiperf/artifacts/dataset-{group_of(sid)}"))
            self.router.reply(sid, command, outcome)


def ready(sid: str, dataset_dir: str) -> GroupReady:
    return GroupReady(dataset_dir=dataset_dir, group_id=group_of(sid), members=[], conversations=3)


def answer_plainly(sid: str, command: Command[Any]) -> Answer:
    """What well-behaved services answer: the shared dataset folder everywhere."""
    match command:
        case BuildDataset():
            return DatasetBuilt(dataset_dir=SHARED, conversations=3)
        case PrepareGroup():
            return ready(sid, SHARED)
        case ProfileStart():
            return ProfileFinished(accounting=RunAccounting())
        case Finalize():
            return Finalized(table="", accounting_line="", balanced=True)
    return Ack()


async def test_workers_get_their_pods_copy_only_after_their_group_manager_made_it(router: FakeRouter) -> None:
    script = Script(router)
    router.answer = script.answer
    control = ControlServer(router)
    driver = ProfileDriver(config=config(kubernetes=True))
    states: list[SystemState] = []

    async def set_state(state: SystemState) -> None:
        states.append(state)

    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        ids = router.register_plan(COUNTS)
        await control.wait_registered(COUNTS.expected(), timeout=5)

        async def drive() -> None:
            assert await driver.drive(control, set_state, anyio.Event()) is SystemState.DONE

        tg.start_soon(drive)
        await anyio.wait_all_tasks_blocked()
        # dataset-manager first, then every worker-group-manager, nobody else yet
        asked = [sid for sid, _ in router.sent]
        assert asked[0] == "dataset-manager"
        assert sorted(asked[1:]) == ["worker-group-manager-g0", "worker-group-manager-g1"]
        for _, command in router.sent[1:]:
            assert isinstance(command, PrepareGroup) and command.dataset_dir == SHARED
        script.release()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()  # control.run
    configures = {sid: c.dataset_dir for sid, c in router.sent if isinstance(c, ProfileConfigure)}
    managers = {"dataset-manager", "worker-group-manager-g0", "worker-group-manager-g1"}
    assert set(configures) == set(ids) - managers
    g0_copy = "/aiperf/artifacts/dataset-g0"
    assert configures["worker-g0-0"] == configures["worker-g0-1"] == g0_copy
    assert configures["worker-g1-0"] == "/aiperf/artifacts/dataset-g1"
    assert "worker-g1-1" not in configures  # the short last pod has one worker
    assert configures["record-processor-g1-0"] == "/aiperf/artifacts/dataset-g1"
    for sid in ("timing-manager", "records-manager", "api", "event-bus-proxy"):
        assert configures[sid] == SHARED
    start = next(i for i, (_, c) in enumerate(router.sent) if isinstance(c, ProfileStart))
    assert start == len(configures) + len(managers)  # credits only after every configure answered
    assert states == [SystemState.READY, SystemState.PROFILING, SystemState.PROCESSING, SystemState.EXPORTING]


async def test_locally_the_group_managers_reply_the_shared_folder_and_workers_use_it(
        router: FakeRouter) -> None:

    router.answer = answer_plainly
    control = ControlServer(router)

    async def set_state(state: SystemState) -> None:
        pass

    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        router.register_plan(COUNTS)
        await control.wait_registered(COUNTS.expected(), timeout=5)
        final = await ProfileDriver(config=config(kubernetes=False)).drive(control, set_state, anyio.Event())
        tg.cancel_scope.cancel()
    assert final is SystemState.DONE
    dirs = {sid: c.dataset_dir for sid, c in router.sent if isinstance(c, ProfileConfigure)}
    assert dirs["worker-g1-0"] == dirs["timing-manager"] == SHARED


async def test_before_start_holds_the_first_phase_until_it_returns(router: FakeRouter) -> None:
    """Kubernetes: the server-metrics container's readiness (`before_start`) is awaited after every
    service is configured and before READY and the timing-manager's ProfileStart."""
    router.answer = answer_plainly
    control = ControlServer(router)
    states: list[SystemState] = []
    release = anyio.Event()
    seen_at_wait: list[int] = []
    waiting, finished = anyio.Event(), anyio.Event()

    async def set_state(state: SystemState) -> None:
        states.append(state)

    async def before_start() -> None:
        seen_at_wait.append(len(router.sent))
        waiting.set()
        await release.wait()

    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        router.register_plan(COUNTS)
        await control.wait_registered(COUNTS.expected(), timeout=5)
        done: list[SystemState] = []

        async def drive() -> None:
            done.append(await ProfileDriver(config=config(kubernetes=False), before_start=before_start)
                        .drive(control, set_state, anyio.Event()))
            finished.set()

        tg.start_soon(drive)
        with anyio.fail_after(5):
            await waiting.wait()
        await anyio.wait_all_tasks_blocked()
        assert states == [] and not any(isinstance(c, ProfileStart) for _, c in router.sent)
        assert sum(isinstance(c, ProfileConfigure) for _, c in router.sent[:seen_at_wait[0]]) > 0
        release.set()
        with anyio.fail_after(5):
            await finished.wait()
        tg.cancel_scope.cancel()
    assert done == [SystemState.DONE] and states[0] is SystemState.READY


async def test_the_server_metrics_wait_ends_on_the_marker_or_after_its_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aiperf.config.markers import SERVER_METRICS_READY_MARKER
    from aiperf.system_controller.main import wait_for_server_metrics

    assert await wait_for_server_metrics(tmp_path, wait_s=0.2) is False
    async with anyio.create_task_group() as tg:
        results: list[bool] = []

        async def wait() -> None:
            results.append(await wait_for_server_metrics(tmp_path, wait_s=30))

        tg.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        assert results == []
        (tmp_path / SERVER_METRICS_READY_MARKER).write_text('{"ready": true}')
    assert results == [True]


async def test_a_group_manager_that_cannot_fetch_fails_configure_before_any_worker_is_asked(
        router: FakeRouter) -> None:
    script = Script(router, wgm_fails="worker-group-manager-g1")
    router.answer = script.answer
    control = ControlServer(router)

    async def set_state(state: SystemState) -> None:
        pass

    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        router.register_plan(COUNTS)
        await control.wait_registered(COUNTS.expected(), timeout=5)
        failure: list[BaseException] = []

        async def drive() -> None:
            try:
                await ProfileDriver(config=config(kubernetes=True)).drive(control, set_state, anyio.Event())
            except CommandError as exc:
                failure.append(exc)

        tg.start_soon(drive)
        await anyio.wait_all_tasks_blocked()
        script.release()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert failure and "worker-group-manager-g1 failed PrepareGroup" in str(failure[0])
    assert not any(control.services[sid].service_type is ServiceType.WORKER for sid, _ in router.sent)


@pytest.mark.parametrize("silent", ["records-manager", "timing-manager"])
async def test_an_unanswered_command_fails_the_run_naming_the_service(router: FakeRouter, silent: str) -> None:
    from aiperf.system_controller.launcher import NoLauncher
    from aiperf.system_controller.service import SystemController

    def answer(sid: str, command: Command[Any]) -> Answer:
        return None if sid == silent and not isinstance(command, Shutdown) else answer_plainly(sid, command)

    router.answer = answer
    cfg = RunConfig(run_id="r", mode="profile", comms=CommsOptions(ipc_dir="/tmp"), services=COUNTS,
                    # The configure ask waits registration_timeout_s + 5 s; the fake services never
                    # heartbeat, so their heartbeat timeout must be longer or it fails the run first.
                    runtime=RuntimeOptions(command_timeout_s=0.2, registration_timeout_s=5,
                                           shutdown_timeout_s=0.2, heartbeat_timeout_s=60),
                    benchmark=Benchmark(models=["m"], phases=[ConcurrencyPhase(duration=0.1, grace_period=0)]))
    cfg = msgspec.structs.replace(cfg, runtime=msgspec.structs.replace(cfg.runtime, cancel_drain_s=0.1))
    router.register_plan(COUNTS)
    controller = SystemController(config=cfg, control=ControlServer(router), launcher=NoLauncher(),
                                  driver=ProfileDriver(config=cfg))
    with anyio.fail_after(20):
        verdict = await controller.run()
    assert verdict.state is SystemState.FAILED
    assert verdict.reason.startswith(f"service {silent} did not answer ")


def test_the_profiling_deadline_follows_the_phases() -> None:
    from aiperf.system_controller.profile_driver import profiling_deadline_s

    timed = RunConfig(run_id="r", comms=CommsOptions(ipc_dir="/tmp"), benchmark=Benchmark(
        models=["m"], phases=[ConcurrencyPhase(name="warmup", requests=5),
                              ConcurrencyPhase(duration=60, grace_period=5)]))
    assert profiling_deadline_s(timed) == float("inf")  # the warmup stops by count
    only_duration = msgspec.structs.replace(timed, benchmark=Benchmark(
        models=["m"], phases=[ConcurrencyPhase(duration=60, grace_period=5)]))
    assert profiling_deadline_s(only_duration) == 60 + 5 + 10 + 30
