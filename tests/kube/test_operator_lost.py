"""The operator with real pods when the run's controller or the operator itself goes away (the
podman cases of issue 23; the cluster of tests/kube/_operator.py enforces the `restricted` Pod
Security level, so every pod here also passed that admission):

- a controller that stops heartbeating (its process frozen with SIGSTOP, as a wedged event loop
  or a stalled node would leave it) fails its run with `ControllerFailed`/`HeartbeatLost` and
  the JobSet goes, instead of holding the pods until a timeout that may not exist;
- a run that finishes while the operator is down longer than the JobSet's
  `ttlSecondsAfterFinished` (the JobSet controller deleted it, and the results with it) is
  Failed `ResultsLost` once the operator is back, with the condition naming the cause.

Opt-in like test_operator_pods.py (AIPERF_PODMAN_E2E=1 after the images are built).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube._operator import (
    BENCHMARK,
    CR_API,
    FAST,
    NS,
    RUN_S,
    TEARDOWN_S,
    cluster,
    played_containers,
    status,
    terminal,
)
from kube._podman import PODMAN_E2E, podman

from aiperf.crd.model import JOB_KIND
from aiperf.kube.containers import CONTROL_PLANE_CONTAINER
from aiperf.kube.jobset import JOBSET_API_VERSION
from aiperf.kuberun.status_push import HEARTBEAT_ANNOTATION
from aiperf.operator.startup import StartupThresholds
from aiperf.testing.fake_kube import FakeKube

pytestmark = [*PODMAN_E2E, pytest.mark.anyio]
HEARTBEAT_LOST_S = 60.0
"""The watchdog's bound in these tests: the controller pushes its status every 5 s, but on the
loaded 2-core CI host a controller still starting its services was seen silent for over 15 s
(the operator's default is 120 s)."""


def submit(kube: FakeKube, name: str, *, requests: int, **spec: object) -> None:
    benchmark = {**BENCHMARK, "phases": [{**BENCHMARK["phases"][0], "requests": requests}],  # type: ignore[index]
                 "datasets": BENCHMARK["datasets"]}
    kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": name, "namespace": NS},
                 "spec": {"benchmark": benchmark, "workersPerPod": 1, **spec}})


def condition(final: dict[str, object], kind: str) -> dict[str, object]:
    conditions = final.get("conditions") or []
    assert isinstance(conditions, list)
    return next((c for c in conditions if c.get("type") == kind), {})


def heartbeat(kube: FakeKube, name: str) -> str | None:
    cr = kube.get(CR_API, JOB_KIND, NS, name) or {}
    return (cr.get("metadata", {}).get("annotations") or {}).get(HEARTBEAT_ANNOTATION)


@pytest.mark.timeout(900)
async def test_a_controller_that_stops_heartbeating_fails_its_run(tmp_path: Path) -> None:
    thresholds = StartupThresholds(warn_after_s=FAST.warn_after_s, fail_after_s=FAST.fail_after_s,
                                   heartbeat_lost_after_s=HEARTBEAT_LOST_S)
    async with cluster(tmp_path, thresholds=thresholds) as c:
        kube = c.kube
        submit(kube, "hb", requests=100_000)
        await kube.wait_until(lambda: (status(kube, "hb").get("phase") == "Running" and heartbeat(kube, "hb"))
                              or terminal(kube, "hb"), timeout=RUN_S)
        assert status(kube, "hb")["phase"] == "Running", status(kube, "hb")
        plane = c.player.pods[(NS, "aiperf-hb-controller-0-0")]
        podman("kill", "--signal", "STOP", f"{plane.name}-{CONTROL_PLANE_CONTAINER}")
        await kube.wait_until(lambda: terminal(kube, "hb"), timeout=HEARTBEAT_LOST_S + 120)
        final = status(kube, "hb")
        lost = condition(final, "ControllerFailed")
        assert final["phase"] == "Failed" and lost.get("status") == "True", final
        assert lost.get("reason") == "HeartbeatLost" and "no controller heartbeat since" in str(lost.get("message"))
        await kube.wait_until(lambda: kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-hb") is None, timeout=60)
        await kube.wait_until(lambda: played_containers(c, "hb") == 0, timeout=TEARDOWN_S)


@pytest.mark.timeout(900)
async def test_a_run_finishing_while_the_operator_is_down_past_the_ttl_is_failed_results_lost(
        tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        kube = c.kube
        submit(kube, "ttl", requests=20, ttlSecondsAfterFinished=1)
        await kube.wait_until(lambda: kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-ttl") is not None,
                              timeout=60)
        await c.operator.stop()  # before the pods start: nobody harvests this run

        def finished_jobset() -> bool:  # or already gone: its TTL is 1 s
            jobset = kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-ttl")
            return jobset is None or any(cond.get("type") in ("Completed", "Failed") and cond.get("status") == "True"
                                         for cond in (jobset.get("status") or {}).get("conditions") or [])

        await kube.wait_until(finished_jobset, timeout=RUN_S)
        exported = status(kube, "ttl")
        jobset = (kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-ttl") or {}).get("status")
        why = (f"{json.dumps(exported)}\n--- the JobSet's status\n{jobset}\n--- the control plane's log\n"
               + c.player.log_tail("aiperf-ttl-controller-0-0", CONTROL_PLANE_CONTAINER, lines=80)
               + "\n--- the worker pod's worker-group-manager\n"
               + c.player.log_tail("aiperf-ttl-workers-0-0", "worker-group-manager"))
        assert exported.get("resultsExported") is True, why  # the controller's last push
        # The JobSet controller's TTL (its timer, 1 s after the Completed transition) while nobody harvests.
        await kube.wait_until(lambda: kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-ttl") is None, timeout=30)
        await kube.wait_until(lambda: played_containers(c, "ttl") == 0, timeout=TEARDOWN_S)
        c.operator.start()
        await kube.wait_until(lambda: terminal(kube, "ttl"), timeout=120)
        final = status(kube, "ttl")
        stored = condition(final, "ResultsStored")
        assert final["phase"] == "Failed" and stored.get("reason") == "ResultsLost", final
        assert "ttlSecondsAfterFinished" in str(stored.get("message")), stored
        assert not list((c.results / NS).glob("ttl/*/profile_export_aiperf.json"))
