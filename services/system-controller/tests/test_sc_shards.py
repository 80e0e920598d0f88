"""`--aggregation sharded`: the controller's shards barrier before `Finalize`, against scripted
services (docs/run-protocol.md)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from aiperf.config import Benchmark, CommsOptions, RunConfig, Runtime, RuntimeOptions, ServiceCounts
from aiperf.messages import Command, Finalize, SendShards, ShardsSent, SystemState
from aiperf.runtime.control_server import ControlServer
from aiperf.system_controller.launcher import NoLauncher
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.service import SystemController
from tests._sc_fakes import Answer, FakeRouter
from tests.test_sc_configure import answer_plainly

pytestmark = pytest.mark.anyio

COUNTS = ServiceCounts(worker_groups=2, workers_per_group=1, record_processors_per_group=2)
PROCESSORS = [f"record-processor-g{g}-{j}" for g in range(2) for j in range(2)]


def config(aggregation: str) -> RunConfig:
    return RunConfig(run_id="r", mode="profile", comms=CommsOptions(ipc_dir="/tmp"), services=COUNTS,
                     benchmark=Benchmark(models=["m"], runtime=Runtime(aggregation=aggregation)),  # type: ignore[arg-type]
                     runtime=RuntimeOptions(command_timeout_s=5, registration_timeout_s=5))


async def drive(router: FakeRouter, aggregation: str, *, hold: str = "") -> tuple[SystemState, list[str]]:
    """Run the driver over scripted services; `hold` answers `SendShards` only once the driver
    is blocked on it (and nothing was sent meanwhile). Returns the end state and the commands
    sent after `ProfileStart`, as `<type> <service id>`."""
    held: list[tuple[str, Command[Any]]] = []

    def answer(sid: str, command: Command[Any]) -> Answer:
        if isinstance(command, SendShards):
            if sid == hold:
                held.append((sid, command))
                return None
            return ShardsSent(shards=1, records=3)
        return answer_plainly(sid, command)

    router.answer = answer
    control, driver = ControlServer(router), ProfileDriver(config=config(aggregation))

    async def set_state(state: SystemState) -> None:
        pass

    result: list[SystemState] = []
    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        router.register_plan(COUNTS)
        await control.wait_registered(COUNTS.expected(), timeout=5)

        async def run() -> None:
            result.append(await driver.drive(control, set_state, anyio.Event()))

        tg.start_soon(run)
        with anyio.fail_after(10):
            while hold and not held:
                await anyio.sleep(0.01)
            if held:
                await anyio.wait_all_tasks_blocked()
                assert not any(isinstance(c, Finalize) for _, c in router.sent)  # waits for every answer
                router.reply(*held[0], ShardsSent())
            while not result:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    names = [f"{type(c).__name__} {sid}" for sid, c in router.sent]
    start = next(i for i, n in enumerate(names) if n.startswith("ProfileStart"))
    return result[0], names[start + 1:]


async def test_every_record_processor_sends_its_shards_before_the_records_manager_finalizes(
        router: FakeRouter) -> None:
    state, after = await drive(router, "sharded", hold="record-processor-g1-0")
    assert state is SystemState.DONE
    assert sorted(after[:-1]) == [f"SendShards {sid}" for sid in PROCESSORS]
    assert after[-1] == "Finalize records-manager"


async def test_records_aggregation_asks_for_no_shards(router: FakeRouter) -> None:
    state, after = await drive(router, "records")
    assert (state, after) == (SystemState.DONE, ["Finalize records-manager"])


async def test_a_processor_that_cannot_send_its_shards_fails_the_run_in_one_line(router: FakeRouter) -> None:
    def answer(sid: str, command: Command[Any]) -> Answer:
        if isinstance(command, SendShards):
            return RuntimeError("no space left") if sid == "record-processor-g0-1" else ShardsSent()
        return answer_plainly(sid, command)

    router.answer = answer
    router.register_plan(COUNTS)
    cfg = config("sharded")
    controller = SystemController(config=cfg, control=ControlServer(router), launcher=NoLauncher(),
                                  driver=ProfileDriver(config=cfg))
    with anyio.fail_after(20):
        verdict = await controller.run()
    assert verdict.state is SystemState.FAILED
    assert verdict.reason.startswith("shards not collected: ") and "no space left" in verdict.reason, verdict.reason
    assert "\n" not in verdict.reason
    assert not any(isinstance(c, Finalize) for _, c in router.sent)
