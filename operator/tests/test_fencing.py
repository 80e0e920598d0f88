"""Status writes against the fake API server, without kopf: a patch computed from a stale read
is refused, `write_status` re-reads and recomputes until its write lands on the latest
version, keeping what the other writer wrote, and a startup-failure claim holds only for the
blocker it was made on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from _harness import CR_API, NS, cr, job

from aiperf.crd.model import JOB_KIND
from aiperf.kubeapi import ApiError, KubeApi, connect
from aiperf.kuberun.jobs import JOBS
from aiperf.operator import startup
from aiperf.operator.desired import Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.reconciler import JobReconciler, utc_now
from aiperf.operator.status import StatusChange, status_patch
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(kube: FakeKube) -> AsyncIterator[KubeApi]:
    async with await connect(kube.kubeconfig_path, None) as c:
        yield c


async def test_a_patch_from_a_stale_read_is_refused(kube: FakeKube, client: KubeApi) -> None:
    kube.create(job())
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Running"})
    stale = cr(kube)
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Completed"})  # another writer wins
    ops = status_patch(stale, StatusChange(values={"phase": "Failed"}), now=utc_now())
    with pytest.raises(ApiError) as exc:
        await client.patch(JOBS, NS, "run", ops, status=True)
    assert exc.value.lost_race
    assert cr(kube)["status"]["phase"] == "Completed"


async def test_write_status_recomputes_after_a_lost_race(kube: FakeKube, client: KubeApi) -> None:
    uid = kube.create(job())["metadata"]["uid"]
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Initializing"})
    reads: list[dict[str, Any]] = []

    def compute(live: dict[str, Any]) -> StatusChange:
        reads.append(live)
        if len(reads) == 1:  # the controller pushes between our read and our write
            kube.set_status(CR_API, JOB_KIND, NS, "run", {**live["status"], "subPhase": "profiling"})
        return StatusChange(values={"phase": "Running"})

    reconciler = JobReconciler(api=client, defaults=Defaults(), metrics=Metrics())
    written = await reconciler.core.write_status(NS, "run", uid, compute)
    assert len(reads) == 2 and reads[1]["status"]["subPhase"] == "profiling"
    assert written is not None and written["status"] == {"phase": "Running", "subPhase": "profiling"}
    assert await reconciler.core.write_status(NS, "run", "another-uid", compute) is None  # a replaced CR is never written


async def test_a_startup_failure_claim_holds_only_for_the_blocker_it_was_made_on(kube: FakeKube,
                                                                                 client: KubeApi) -> None:
    kube.create(job())
    old = {"reason": "ImagePullBackOff", "pod": "p", "fingerprint": "a" * 16, "critical": True,
           "firstObservedTime": "2026-01-01T00:00:00Z"}
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Initializing", "startupIssue": old})
    # Another replica saw the blocker change (a fixed image, a new error) and wrote it.
    new = {**old, "reason": "CreateContainerConfigError", "fingerprint": "b" * 16}
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Initializing", "startupIssue": new})
    live = cr(kube)
    late = datetime(2027, 1, 1, tzinfo=UTC)
    assert startup.failure(live, old["fingerprint"], now=late, thresholds=startup.DEFAULT_THRESHOLDS) is None
    assert startup.failure(live, new["fingerprint"], now=late, thresholds=startup.DEFAULT_THRESHOLDS) is not None
    # Even on the latest resourceVersion, the server refuses a claim made on the old fingerprint.
    claim = StatusChange(values={"phase": "Failed"}, expect=startup.claim_fence(old["fingerprint"]))
    with pytest.raises(ApiError) as exc:
        await client.patch(JOBS, NS, "run", status_patch(live, claim, now=late), status=True)
    assert exc.value.lost_race and cr(kube)["status"]["phase"] == "Initializing"
