"""Status writes against the fake API server, without kopf: a patch computed from a stale read
is refused, and `write_status` re-reads and recomputes until its write lands on the latest
version, keeping what the other writer wrote."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _harness import CR_API, NS, cr, job
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import new_client_from_config

from aiperf.kube.crd_model import JOB_KIND
from aiperf.operator import api
from aiperf.operator.desired import Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.reconciler import JobReconciler, utc_now
from aiperf.operator.status import StatusChange, status_patch
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(kube: FakeKube) -> AsyncIterator[ApiClient]:
    async with await new_client_from_config(kube.kubeconfig_path, persist_config=False) as c:
        yield c


async def test_a_patch_from_a_stale_read_is_refused(kube: FakeKube, client: ApiClient) -> None:
    kube.create(job())
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Running"})
    stale = cr(kube)
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Completed"})  # another writer wins
    ops = status_patch(stale, StatusChange(values={"phase": "Failed"}), now=utc_now())
    with pytest.raises(ApiException) as exc:
        await api.json_patch(client, CR_API, JOB_KIND, NS, "run", ops, status=True)
    assert api.lost_race(exc.value)
    assert cr(kube)["status"]["phase"] == "Completed"


async def test_write_status_recomputes_after_a_lost_race(kube: FakeKube, client: ApiClient) -> None:
    uid = kube.create(job())["metadata"]["uid"]
    kube.set_status(CR_API, JOB_KIND, NS, "run", {"phase": "Initializing"})
    reads: list[dict[str, Any]] = []

    def compute(live: dict[str, Any]) -> StatusChange:
        reads.append(live)
        if len(reads) == 1:  # the controller pushes between our read and our write
            kube.set_status(CR_API, JOB_KIND, NS, "run", {**live["status"], "subPhase": "profiling"})
        return StatusChange(values={"phase": "Running"})

    reconciler = JobReconciler(api=client, defaults=Defaults(), metrics=Metrics())
    written = await reconciler.write_status(NS, "run", uid, compute)
    assert len(reads) == 2 and reads[1]["status"]["subPhase"] == "profiling"
    assert written is not None and written["status"] == {"phase": "Running", "subPhase": "profiling"}
    assert await reconciler.write_status(NS, "run", "another-uid", compute) is None  # a replaced CR is never written
