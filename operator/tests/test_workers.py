"""Issue 23, item 8, with real kopf against the fake API server: the operator seeds
`status.workers` from the plan and the controller takes it over; `WorkersReady` follows the
controller's dispatch-ready workers, not the pods; a warmup-kind phase keeps the run Initializing."""

from __future__ import annotations

import pytest
from _harness import condition, controller_profiling, cr, job, operator, phase, set_jobset_status

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


async def test_workers_are_seeded_then_taken_over_and_warmup_is_not_running(kube: FakeKube) -> None:
    async with operator(kube):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        assert cr(kube)["status"]["workers"] == {"ready": 0, "total": 2}
        set_jobset_status(kube, "run", controller=False)  # every pod ready: not yet workers
        await kube.wait_until(lambda: condition(kube, "WorkersReady").get("reason") == "WaitingForController")
        assert phase(kube) == "Initializing"
        controller_profiling(kube, kind="warmup")  # the controller's warmup: dispatching, but not Running
        await kube.wait_until(lambda: condition(kube, "WorkersReady").get("status") == "True")
        assert condition(kube, "WorkersReady")["message"] == ("2 of 2 workers ready to dispatch (2 of 2 worker pods "
                                                             "ready)")
        assert phase(kube) == "Initializing" and cr(kube)["status"]["currentPhase"] == "warmup"
        controller_profiling(kube)  # the first profiling-kind phase starts
        await kube.wait_until(lambda: phase(kube) == "Running")
        assert cr(kube)["status"]["workers"]["totalPods"] == 2
