"""What the controller says in its AIPerfJob's status: phases by their config names, progress,
the nine worker counts, the verdict (pure: events and states in, an `AIPerfJobStatus` out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from aiperf.config import Benchmark, CommsOptions, ConcurrencyPhase, RunConfig, ServiceCounts
from aiperf.kuberun.status_push import encode_status
from aiperf.messages import (
    Finalized,
    Phase,
    PhaseAccounting,
    PhaseComplete,
    PhaseStarted,
    Progress,
    RunAccounting,
    ServiceState,
    SystemState,
)
from aiperf.runtime.control_server import ServiceInfo
from aiperf.system_controller.job_status import RunTracker
from aiperf.system_controller.launcher import Planned
from aiperf.system_controller.plan import plan_services
from aiperf.system_controller.profile_driver import ProfileOutcome
from aiperf.system_controller.service import Verdict

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 1, 1, tzinfo=UTC)
COUNTS = ServiceCounts(worker_groups=2, workers_per_group=2, last_group_workers=1, record_processors_per_group=1)
"""Two worker pods: g0 with two workers, g1 with one; one record processor each."""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Registry:
    """What the tracker reads of the controller."""

    planned: list[Planned]
    services: dict[str, ServiceInfo] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)

    def up(self, *ids: str) -> None:
        kinds = {p.service_id: p for p in self.planned}
        for sid in ids:
            self.services[sid] = ServiceInfo(service_id=sid, service_type=kinds[sid].service_type, pid=1, host="h",
                                             group_id=kinds[sid].group_id, state=ServiceState.RUNNING)


def config() -> RunConfig:
    phases = [ConcurrencyPhase(name="cache_prime", kind="warmup", requests=10),
              ConcurrencyPhase(name="steady", kind="profiling", requests=200)]
    return RunConfig(run_id="r", mode="profile", comms=CommsOptions(ipc_dir="/tmp"), services=COUNTS,
                     benchmark=Benchmark(models=["m"], phases=phases), kubernetes=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_phases_keep_their_config_names_and_current_phase_is_always_one_of_them() -> None:
    clock = Clock()
    changes: list[str] = []
    tracker = RunTracker(config=config(), clock=clock, on_change=lambda: changes.append("x"))
    assert encode_status(tracker.status()) == {
        "subPhase": "initializing", "workers": {
            "ready": 0, "total": 3, "dispatchable": 0, "routerConnected": 0, "readyRecordProcessors": 0,
            "declaredRecordProcessors": 2, "readyPods": 0, "totalPods": 2, "degradedPods": 0}}
    tracker.apply(PhaseStarted(phase=Phase.WARMUP, started_at_ns=1, expected_credits=10))
    clock.now += timedelta(seconds=2)
    tracker.apply(Progress(phase=Phase.WARMUP, completed=10, errors=1))
    tracker.apply(PhaseComplete(phase=Phase.WARMUP, issued=10, returned=10))
    status = tracker.status()
    assert status.current_phase == "cache_prime" and set(status.phases) == {"cache_prime"}
    warmup = status.phases["cache_prime"]
    assert (warmup.phase_kind, warmup.phase_index, warmup.profiling_index) == ("warmup", 0, None)
    assert (warmup.requests_completed, warmup.requests_failed, warmup.requests_sent) == (10, 1, 10)
    assert warmup.requests_per_second == 5.0 and warmup.end_time == "2026-01-01T00:00:02Z"
    assert status.requests_completed is None  # top-level counters are the profiling-kind phase's
    tracker.apply(Progress(phase=Phase.PROFILING, completed=50, errors=0))  # its start was missed
    clock.now += timedelta(seconds=10)
    status = tracker.status()
    steady = status.phases["steady"]
    assert status.current_phase == "steady" and (steady.phase_index, steady.profiling_index) == (1, 0)
    assert (status.requests_completed, status.requests_total, status.progress_percent) == (50, 200, 25.0)
    assert status.requests_per_second == steady.requests_per_second == 5.0
    assert steady.end_time is None and steady.requests_sent is None
    assert len(changes) == 2  # a phase start and a phase end; progress rides the periodic push
    encode_status(status)  # a valid push: currentPhase is a key of phases


async def test_worker_counts_follow_registrations_configuration_and_lost_pods() -> None:
    registry = Registry(planned=plan_services(COUNTS))
    tracker = RunTracker(config=config())
    tracker.watch(registry)  # type: ignore[arg-type]  # what it reads of a SystemController
    registry.up("worker-g0-0", "worker-g0-1", "record-processor-g0-0", "worker-group-manager-g0", "worker-g1-0")
    workers = tracker.status().workers
    assert workers is not None
    assert (workers.ready, workers.dispatchable, workers.ready_pods, workers.ready_record_processors) == (3, 0, 1, 1)
    await tracker.on_state(SystemState.CONFIGURING)
    await tracker.on_state(SystemState.READY)
    registry.lost["worker-g0-1"] = "lost with worker pod g0"
    workers = tracker.status().workers
    assert workers is not None
    assert (workers.ready, workers.dispatchable, workers.router_connected) == (2, 2, 2)
    assert (workers.ready_pods, workers.degraded_pods, workers.total_pods) == (0, 1, 2)
    await tracker.on_state(SystemState.STOPPING)  # services stop now: the counts are kept as they were
    registry.services.clear()
    assert tracker.status().workers == workers and tracker.status().sub_phase is SystemState.STOPPING


async def test_the_verdict_brings_exact_counts_a_failure_and_whether_results_were_exported() -> None:
    clock = Clock()
    tracker = RunTracker(config=config(), clock=clock)
    tracker.apply(PhaseStarted(phase=Phase.PROFILING, started_at_ns=1, expected_credits=200))
    start = int(T0.timestamp() * 1e9)
    accounting = RunAccounting(phases={Phase.PROFILING: PhaseAccounting(
        issued=200, sent=198, ok=190, failed=5, cancelled=3, start_wall_ns=start, end_wall_ns=start + 4_000_000_000)})
    await tracker.on_state(SystemState.FAILED)
    tracker.finish(Verdict(state=SystemState.FAILED, reason="service worker-g0-0 failed: boom"),
                   ProfileOutcome(accounting=accounting))
    status = tracker.status()
    steady = status.phases["steady"]
    assert (steady.requests_sent, steady.requests_completed, steady.requests_failed, steady.requests_cancelled) == (
        198, 198, 5, 3)
    assert steady.requests_per_second == 49.5 and steady.end_time == "2026-01-01T00:00:04Z"
    assert status.controller_failure is not None
    assert status.controller_failure.message == "service worker-g0-0 failed: boom"
    assert status.controller_failure.reason == "RunFailed" and status.results_exported is False
    done = RunTracker(config=config())
    done.finish(Verdict(state=SystemState.DONE), ProfileOutcome(results=Finalized(
        table="", accounting_line="", balanced=True)))
    assert done.status().controller_failure is None and done.status().results_exported is True
    bring_up = RunTracker(config=config())
    bring_up.finish(Verdict(state=SystemState.DONE), None)
    assert bring_up.status().results_exported is False


async def test_server_metrics_projection_rides_on_the_status_push(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aiperf.kuberun.status_push import status_ops
    from aiperf.servermetrics.manager import read_projection, write_projection

    tracker = RunTracker(config=config(), clock=Clock(), server_metrics=lambda: read_projection(tmp_path))
    assert "serverMetrics" not in encode_status(tracker.status())  # nothing written yet: key left out
    projection = {"summary": {"endpoints_configured": ["http://s/metrics"]}, "metrics": {},
                  "projection_dropped": True, "projection_message": "too large"}
    write_projection(tmp_path, projection)
    ops = status_ops({"metadata": {"uid": "u"}, "status": {"phase": "Running"}}, tracker.status(), uid="u")
    # `add` replaces the whole value: a snapshot, never merged with an older projection
    assert {"op": "add", "path": "/status/serverMetrics", "value": projection} in ops
