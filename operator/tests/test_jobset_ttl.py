"""Issue 23, item 10: the run finished while the operator was down longer than the JobSet's
`ttlSecondsAfterFinished` (the fake plays the JobSet controller's TTL: `expire_jobsets`), with
real kopf against the fake API server: results already on the volume end the run Completed from
there; results the controller exported but nobody copied end it Failed `ResultsLost`, never the
generic `JobSetMissing`."""

from __future__ import annotations

from pathlib import Path

import pytest
from _harness import condition, cr, job, jobset, operator, phase, set_jobset_status

from aiperf.results.index import ResultsIndex
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.stored_runs import complete

pytestmark = pytest.mark.anyio


async def finished_while_down(kube: FakeKube, results: Path) -> None:
    """Run `run` to Running under an operator that then stops (the test finishes the run and
    plays the TTL while none runs)."""
    async with operator(kube, results_dir=results):
        kube.create(job(ttlSecondsAfterFinished=60))
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        set_jobset_status(kube, "run")
        await kube.wait_until(lambda: phase(kube) == "Running")


async def test_results_the_controller_exported_but_nobody_copied_are_reported_lost(kube: FakeKube,
                                                                                   tmp_path: Path) -> None:
    await finished_while_down(kube, tmp_path)
    status = dict(cr(kube)["status"])
    kube.set_status("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "bench", "run", {**status, "resultsExported": True})
    set_jobset_status(kube, "run", condition="Completed")
    assert kube.expire_jobsets() == 1
    await kube.wait_until(lambda: jobset(kube) is None)
    async with operator(kube, results_dir=tmp_path):
        await kube.wait_until(lambda: phase(kube) == "Failed", timeout=20)
    cond = condition(kube, "ResultsStored")
    assert (cond["status"], cond["reason"]) == ("False", "ResultsLost")
    assert "ttlSecondsAfterFinished" in cond["message"] and not condition(kube, "ResourcesCreated").get(
        "reason") == "JobSetMissing"


async def test_results_already_on_the_volume_complete_the_run(kube: FakeKube, tmp_path: Path) -> None:
    await finished_while_down(kube, tmp_path)
    live = cr(kube)
    epoch = live["status"]["runEpoch"]
    # The harvest stored them, then the operator stopped before it wrote Completed.
    await complete(ResultsIndex(tmp_path), "bench", "run", epoch, uid=live["metadata"]["uid"])
    set_jobset_status(kube, "run", condition="Completed")
    assert kube.expire_jobsets() == 1
    await kube.wait_until(lambda: jobset(kube) is None)
    async with operator(kube, results_dir=tmp_path):
        await kube.wait_until(lambda: phase(kube) == "Completed", timeout=20)
    assert cr(kube)["status"]["resultsPath"] == f"bench/run/{epoch}"
    assert condition(kube, "ResultsStored")["status"] == "True"
