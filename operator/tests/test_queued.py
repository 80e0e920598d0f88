"""Issue 23, item 7: a run whose JobSet a queue holds (Kueue: the `kueue.x-k8s.io/queue-name`
label, the JobSet created suspended by Kueue's webhook, not by us) shows phase Queued with the
reason, moves on once admitted, and can still be cancelled; real kopf against the fake."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _harness import condition, cr, job, jobset, operator, phase, set_jobset_status

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio
QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}


@pytest.fixture
async def kueue() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=["bench"], kueue=True) as fake:
        fake.install_crd(build_crd(JOB_KIND))
        yield fake


async def test_a_run_held_by_its_queue_is_queued_until_admitted(kueue: FakeKube) -> None:
    async with operator(kueue):
        kueue.create(job(podTemplate={"labels": QUEUE}))
        await kueue.wait_until(lambda: phase(kueue) == "Queued", timeout=20)
        held = condition(kueue, "Queued")
        assert (held["status"], held["reason"]) == ("True", "SuspendedByQueue")
        assert "suspended by its queue team-a" in held["message"]
        kueue.kueue_admit("bench", "aiperf-run", {"pool": "gpu"})
        await kueue.wait_until(lambda: phase(kueue) == "Initializing")
        assert condition(kueue, "Queued")["reason"] == "Admitted"
        set_jobset_status(kueue, "run")
        await kueue.wait_until(lambda: phase(kueue) == "Running")


async def test_a_queued_run_can_be_cancelled(kueue: FakeKube) -> None:
    async with operator(kueue):
        kueue.create(job(podTemplate={"labels": QUEUE}))
        await kueue.wait_until(lambda: phase(kueue) == "Queued", timeout=20)
        live = cr(kueue)
        kueue.update({**live, "spec": {**live["spec"], "cancel": True}})
        await kueue.wait_until(lambda: phase(kueue) == "Cancelled")
        assert (jobset(kueue) or {}).get("spec", {}).get("suspend") is True
