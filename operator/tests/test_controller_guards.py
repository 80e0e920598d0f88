"""Issue 23, items 4 and 5, with real kopf against the fake API server on an injected clock (the
test moves time, never sleeps): a timeout never throws away results the controller has exported
(the drain guard), and the operator reads the controller's heartbeat and `controllerFailure`."""

from __future__ import annotations

from typing import Any

import pytest
from _harness import CR_API, NS, condition, cr, job, jobset, operator, phase, set_jobset_status
from _pods import Clock

from aiperf.crd.model import JOB_KIND
from aiperf.operator.reconciler import DRAIN_GRACE_S
from aiperf.operator.startup import DEFAULT_THRESHOLDS
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


def controller_pushes(kube: FakeKube, **status: Any) -> None:
    """Play the run's controller: merge `status` into the CR's status (its own keys)."""
    current = dict(cr(kube).get("status") or {})
    kube.set_status(CR_API, JOB_KIND, NS, "run", {**current, **status})


async def running(kube: FakeKube, **spec: Any) -> None:
    kube.create(job(**spec))
    await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
    set_jobset_status(kube, "run")
    await kube.wait_until(lambda: phase(kube) == "Running")


async def test_a_timeout_after_the_results_were_exported_lets_the_run_finish(kube: FakeKube) -> None:
    clock = Clock()
    async with operator(kube, clock=clock):
        await running(kube, timeoutSeconds=60)
        controller_pushes(kube, resultsExported=True, subPhase="stopping")
        clock.advance(61)
        await kube.wait_until(lambda: condition(kube, "TimedOut").get("reason") == "DrainingResults")
        assert condition(kube, "TimedOut")["status"] == "False" and phase(kube) == "Running"
        assert jobset(kube) is not None
        set_jobset_status(kube, "run", condition="Completed")  # the control plane exited, harvested
        await kube.wait_until(lambda: phase(kube) == "Completed")
        assert jobset(kube) is not None


async def test_the_drain_guard_is_bounded_and_needs_exported_results(kube: FakeKube) -> None:
    clock = Clock()
    async with operator(kube, clock=clock):
        await running(kube, timeoutSeconds=60)
        controller_pushes(kube, resultsExported=False)  # the exports failed: nothing to keep
        clock.advance(61)
        await kube.wait_until(lambda: phase(kube) == "Failed")
        assert condition(kube, "TimedOut")["reason"] == "Timeout"
        await kube.wait_until(lambda: jobset(kube) is None)

    clock = Clock()
    kube.create(job("other", timeoutSeconds=60))
    async with operator(kube, clock=clock):
        await kube.wait_until(lambda: phase(kube, "other") == "Initializing", timeout=20)
        current = dict(cr(kube, "other").get("status") or {})
        kube.set_status(CR_API, JOB_KIND, NS, "other", {**current, "resultsExported": True})
        clock.advance(61 + DRAIN_GRACE_S)
        await kube.wait_until(lambda: phase(kube, "other") == "Failed")
        assert condition(kube, "TimedOut", "other")["status"] == "True"


def heartbeat(kube: FakeKube, at: str, name: str = "run") -> None:
    """Play the controller's heartbeat push (the annotation, at `at`)."""
    from aiperf.kuberun.status_push import HEARTBEAT_ANNOTATION

    live = cr(kube, name)
    meta = live["metadata"]
    kube.update({**live, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}),
                                                              HEARTBEAT_ANNOTATION: at}}})


async def syncs(kube: FakeKube, count: int) -> None:
    """Wait until the operator read the run `count` more times (a sync each, on the resync timer)."""
    def reads() -> int:
        return len(kube.requests_for("GET", f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs/run"))
    start = reads()
    await kube.wait_until(lambda: reads() >= start + count)


def stamp(clock: Clock, seconds: float = 0) -> str:
    from datetime import timedelta

    return (clock.now + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_controller_failure_fails_the_run_at_once_with_its_own_reason(kube: FakeKube) -> None:
    async with operator(kube):
        await running(kube)
        controller_pushes(kube, controllerFailure={"message": "worker pods aiperf-run-workers-0 stopped heartbeating",
                                                   "reason": "WorkersLost", "service": "system-controller"})
        await kube.wait_until(lambda: phase(kube) == "Failed")
        cond = condition(kube, "ControllerFailed")
        assert (cond["status"], cond["reason"]) == ("True", "WorkersLost")
        assert "(system-controller): worker pods aiperf-run-workers-0 stopped heartbeating" in cond["message"]
        assert jobset(kube) is not None  # the controller is on its way out: its pods end by themselves


async def test_a_stale_heartbeat_fails_the_run_and_deletes_its_jobset(kube: FakeKube) -> None:
    clock = Clock()
    lost_after = DEFAULT_THRESHOLDS.heartbeat_lost_after_s
    async with operator(kube, clock=clock):
        await running(kube)
        clock.advance(10 * lost_after)  # no heartbeat yet: not judged (startup diagnosis's business)
        heartbeat(kube, stamp(clock))
        clock.advance(lost_after - 5)
        await syncs(kube, 2)  # just within the limit: alive
        assert phase(kube) == "Running"
        clock.advance(10)
        await kube.wait_until(lambda: phase(kube) == "Failed")
        cond = condition(kube, "ControllerFailed")
        assert (cond["status"], cond["reason"]) == ("True", "HeartbeatLost")
        assert f"over {lost_after:g} s" in cond["message"] and "aiperf kube logs run -n bench" in cond["message"]
        await kube.wait_until(lambda: jobset(kube) is None)
