"""Kubernetes mode: heartbeats are the only liveness signal; a worker pod is lost as a unit,
and losing more than `max_lost_worker_fraction` of the workers fails the run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest

from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.messages import ServiceType, SystemState
from aiperf.runtime.control_server import ControlServer
from aiperf.system_controller.launcher import NoLauncher
from aiperf.system_controller.service import SystemController
from tests._sc_fakes import FakeClock, FakeRouter

pytestmark = pytest.mark.anyio

COUNTS = ServiceCounts(worker_groups=3, workers_per_group=2, record_processors_per_group=1)
TIMEOUT, INTERVAL = 10.0, 1.0


def config(*, kubernetes: bool = True, fraction: float = 0.5, counts: ServiceCounts = COUNTS,
           registration_timeout_s: float = 5.0) -> RunConfig:
    return RunConfig(run_id="r", comms=CommsOptions(ipc_dir="/tmp"), services=counts, kubernetes=kubernetes,
                     runtime=RuntimeOptions(heartbeat_interval_s=INTERVAL, heartbeat_timeout_s=TIMEOUT,
                                            max_lost_worker_fraction=fraction,
                                            registration_timeout_s=registration_timeout_s))


@dataclass
class FakeDriver:
    """Absorbs worker loss while `profiling` (like `ProfileDriver`), recording it."""

    profiling: bool = True
    lost: list[str] = field(default_factory=list)

    async def drive(self, control: ControlServer, set_state: Callable[[SystemState], object],
                    cancelled: anyio.Event) -> SystemState:
        await cancelled.wait()
        return SystemState.CANCELLED

    async def worker_lost(self, service_id: str, why: str) -> bool:
        if not self.profiling:
            return False
        self.lost.append(service_id)
        return True


@dataclass
class Pods:
    router: FakeRouter
    clock: FakeClock
    controller: SystemController
    driver: FakeDriver
    ids: list[str]

    async def later(self, seconds: float, *, alive: Callable[[str], bool]) -> None:
        """Move the clock; the services for which `alive` holds heartbeat meanwhile."""
        self.clock.now += seconds
        self.router.heartbeat(*[sid for sid in self.ids if alive(sid)])
        await anyio.wait_all_tasks_blocked()

    async def sweep(self) -> None:
        await self.controller._check_liveness()


@asynccontextmanager
async def pods(router: FakeRouter, run_config: RunConfig,
               driver: FakeDriver | None = None) -> AsyncIterator[Pods]:
    clock = FakeClock()
    control = ControlServer(router, clock=clock)
    driver = driver or FakeDriver()
    controller = SystemController(config=run_config, control=control, launcher=NoLauncher(), driver=driver)
    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        ids = router.register_plan(run_config.services)
        await control.wait_registered(run_config.services.expected(), timeout=5)
        await anyio.wait_all_tasks_blocked()  # the last heartbeats are in too
        yield Pods(router=router, clock=clock, controller=controller, driver=driver, ids=ids)
        tg.cancel_scope.cancel()


def outside(*groups: str) -> Callable[[str], bool]:
    return lambda sid: not any(sid.endswith(f"-{g}") or f"-{g}-" in sid for g in groups)


async def test_a_silent_pod_is_lost_as_a_unit_and_degrades_the_run(router: FakeRouter) -> None:
    async with pods(router, config()) as p:
        await p.later(TIMEOUT + 0.5, alive=outside("g2"))
        await p.sweep()
        assert p.driver.lost == ["worker-g2-0", "worker-g2-1"]
        assert not p.controller._failed.is_set(), p.controller._failure
        assert p.controller._lost_groups == {"g2": f"missed heartbeats for {TIMEOUT:g}s"}
        assert {"worker-group-manager-g2", "record-processor-g2-0"} <= set(p.controller._lost)
        await p.later(2 * INTERVAL + 1, alive=outside("g2"))
        await p.sweep()  # the pod's record-processor and manager still do not fail the run
        assert not p.controller._failed.is_set(), p.controller._failure
        assert p.driver.lost == ["worker-g2-0", "worker-g2-1"]


async def test_losing_more_than_the_fraction_fails_the_run_naming_the_pods(router: FakeRouter) -> None:
    async with pods(router, config(fraction=0.5)) as p:
        await p.later(TIMEOUT + 0.5, alive=outside("g1", "g2"))
        await p.sweep()
        assert p.controller._failed.is_set()
        assert p.controller._failure == (
            "lost 4 of 6 workers, more than runtime.max_lost_worker_fraction=0.5 allows: "
            "worker pods g1, g2 stopped heartbeating")


async def test_a_lone_lost_worker_counts_toward_the_fraction(router: FakeRouter) -> None:
    async with pods(router, config(fraction=0.5)) as p:
        await p.later(TIMEOUT + 2 * INTERVAL + 1,
                      alive=lambda sid: sid != "worker-g0-0" and outside("g2")(sid))
        await p.sweep()
        assert sorted(p.driver.lost) == ["worker-g0-0", "worker-g2-0", "worker-g2-1"]
        assert not p.controller._failed.is_set()  # 3 of 6 is not more than half
        await p.later(TIMEOUT + 2 * INTERVAL + 1,
                      alive=lambda sid: sid not in ("worker-g0-0", "worker-g0-1") and outside("g2")(sid))
        await p.sweep()
        assert p.controller._failure.endswith(
            "worker pods g2 stopped heartbeating; workers worker-g0-0, worker-g0-1 lost")


async def test_losing_every_worker_fails_even_at_fraction_one(router: FakeRouter) -> None:
    counts = ServiceCounts(worker_groups=2, workers_per_group=2, last_group_workers=1)
    async with pods(router, config(fraction=1.0, counts=counts)) as p:
        await p.later(TIMEOUT + 0.5, alive=outside("g0"))
        await p.sweep()
        assert not p.controller._failed.is_set()
        await p.later(TIMEOUT + 0.5, alive=outside("g0", "g1"))
        await p.sweep()
        assert p.controller._failure.startswith("lost 3 of 3 workers")


async def test_a_record_processor_silent_alone_fails_the_run_after_the_pod_grace(router: FakeRouter) -> None:
    async with pods(router, config()) as p:
        await p.later(TIMEOUT + 0.5, alive=lambda sid: sid != "record-processor-g0-0")
        await p.sweep()
        assert not p.controller._failed.is_set()  # maybe the first of a dying pod
        await p.later(2 * INTERVAL, alive=lambda sid: sid != "record-processor-g0-0")
        await p.sweep()
        assert p.controller._failure == f"service record-processor-g0-0 missed heartbeats for {TIMEOUT:g}s"


async def test_a_pod_lost_before_profiling_fails_the_run(router: FakeRouter) -> None:
    async with pods(router, config(), FakeDriver(profiling=False)) as p:
        await p.later(TIMEOUT + 0.5, alive=outside("g1"))
        await p.sweep()
        assert p.controller._failure == (
            f"service worker-g1-0 lost with worker pod g1 (missed heartbeats for {TIMEOUT:g}s)")


async def test_locally_a_silent_record_processor_fails_at_once(router: FakeRouter) -> None:
    async with pods(router, config(kubernetes=False)) as p:
        await p.later(TIMEOUT + 0.5, alive=lambda sid: sid != "record-processor-g0-0")
        await p.sweep()
        assert p.controller._failure == f"service record-processor-g0-0 missed heartbeats for {TIMEOUT:g}s"


async def test_locally_losing_most_workers_only_degrades(router: FakeRouter) -> None:
    async with pods(router, config(kubernetes=False, fraction=0.0)) as p:
        await p.later(TIMEOUT + 0.5, alive=lambda sid: not sid.startswith("worker-g") or "manager" in sid)
        await p.sweep()
        assert len(p.driver.lost) == 6
        assert not p.controller._failed.is_set()


async def test_kubernetes_registration_names_the_missing_pods(router: FakeRouter) -> None:
    counts = ServiceCounts(worker_groups=3, workers_per_group=2, last_group_workers=1)
    run_config = config(counts=counts, registration_timeout_s=0.2)
    control = ControlServer(router)
    controller = SystemController(config=run_config, control=control, launcher=NoLauncher(),
                                  driver=FakeDriver())
    router.register_plan(counts, skip=frozenset({"worker-g0-1", "worker-group-manager-g2", "worker-g2-0",
                                                  "record-processor-g2-0"}))
    verdict = await controller.run()
    assert verdict.state is SystemState.FAILED
    assert verdict.reason == ("services never registered within 0.2s: worker pod g0: worker-g0-1; "
                              "worker pod g2: none of its services (is the pod scheduled?)")
    # everyone registered got the shutdown
    assert {sid for sid, _ in router.sent} == set(control.services)


async def test_locally_a_service_with_a_live_process_is_not_judged_by_heartbeats(router: FakeRouter) -> None:
    from aiperf.system_controller.launcher import Planned

    class LiveProcess:
        planned = Planned(service_type=ServiceType.RECORD_PROCESSOR, service_id="record-processor-g0-0")
        pid, returncode = 1, None

    async with pods(router, config(kubernetes=False)) as p:
        p.controller._handles["record-processor-g0-0"] = LiveProcess()  # type: ignore[assignment]
        await p.later(TIMEOUT + 0.5, alive=lambda sid: sid != "record-processor-g0-0")
        await p.sweep()
        assert not p.controller._failed.is_set()
