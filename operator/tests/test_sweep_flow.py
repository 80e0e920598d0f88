"""AIPerfSweep in the cluster (issue 12, item 4), with real kopf and the real operator handlers
against the fake API server: the test plays the sweep-controller in-process (the real
`SweepController` with its own API client) and the kubelet/JobSet controller of each child run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import kopf
import pytest
from _harness import CR_API, NS, operator, phase
from _sweep import (
    NAME,
    DictSummaries,
    child,
    controller,
    finish_child,
    summary,
    sweep,
    sweep_cr,
    sweep_pod,
    sweep_status,
)

from aiperf.config.markers import SWEEP_AGGREGATE_FILES
from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.kube.jobset import JOBSET_API_VERSION
from aiperf.kubeapi import KubeApi, connect
from aiperf.kuberun.sweep_plan import SWEEP_LABEL, plan_for, uid_seed
from aiperf.kuberun.sweeps import SWEEPS, SidecarSummaries
from aiperf.operator.desired import Defaults
from aiperf.operator.metrics import Metrics
from aiperf.operator.sweep import SweepReconciler
from aiperf.operator.sweep_desired import decode
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(kube: FakeKube) -> AsyncIterator[KubeApi]:
    kube.install_crd(build_crd(SWEEP_KIND))
    async with await connect(kube.kubeconfig_path, None) as api:
        yield api


def jobset(kube: FakeKube) -> dict[str, Any] | None:
    return kube.get(JOBSET_API_VERSION, "JobSet", NS, f"aiperf-sweep-{NAME}")


def has_child(kube: FakeKube, name: str) -> bool:
    return bool(child(kube, name))


def is_current(kube: FakeKube, name: str) -> bool:
    return sweep_status(kube).get("currentChild") == name


def completed(kube: FakeKube, name: str) -> bool:
    return phase(kube, name) == "Completed"


async def test_a_two_variation_sweep_completes_with_its_aggregate_on_the_results_volume(
        kube: FakeKube, client: KubeApi, tmp_path: Path) -> None:
    results, work = tmp_path / "results", tmp_path / "sweep-controller"
    async with operator(kube, results_dir=results):
        kube.create(sweep())
        await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Initializing", timeout=20)
        status = sweep_status(kube)
        assert (status["totalVariations"], status["totalRuns"]) == (2, 2) and status["runEpoch"].isdigit()
        uid = sweep_cr(kube)["metadata"]["uid"]
        for kind, version in (("ServiceAccount", "v1"), ("Role", "rbac.authorization.k8s.io/v1"),
                              ("RoleBinding", "rbac.authorization.k8s.io/v1"), ("JobSet", JOBSET_API_VERSION)):
            owned = kube.get(version, kind, NS, f"aiperf-sweep-{NAME}")
            assert owned is not None and owned["metadata"]["ownerReferences"][0]["uid"] == uid, kind
        live_jobset = jobset(kube)
        assert live_jobset is not None
        env = {e["name"]: e["value"] for e in live_jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
               ["spec"]["containers"][0]["env"]}
        assert env["AIPERF_SWEEP_UID"] == uid and env["AIPERF_SWEEP_EPOCH"] == status["runEpoch"]

        sweeper = controller(client, kube, work, SidecarSummaries(api=client, cache_dir=work / ".children"))
        codes: list[int] = []
        sidecars = []
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                codes.append(await sweeper.run())
            tg.start_soon(run)
            for index, concurrency in enumerate((2, 4)):
                name = f"{NAME}-v{index}-t1"
                await kube.wait_until(partial(has_child, kube, name), timeout=20)
                if index == 0:
                    await kube.wait_until(partial(is_current, kube, name))
                    assert sweep_status(kube)["phase"] == "Running"
                    assert sweep_status(kube)["currentChildRef"]["variation"] == 0
                sidecars.append(await finish_child(kube, name, concurrency))
                await kube.wait_until(partial(completed, kube, name), timeout=20)
        assert codes == [0]
        assert [s.shutdowns for s in sidecars] == [1, 1]  # each child's sidecar retired once read
        assert sweep_status(kube)["aggregation"]["phase"] == "Complete"
        sweep_pod(kube, {f: (work / f).read_bytes() for f in SWEEP_AGGREGATE_FILES})
        await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Completed", timeout=20)
        await kube.wait_until(lambda: jobset(kube) is None)  # reaped once harvested
    status = sweep_status(kube)
    assert status["resultsAvailable"] is True
    assert status["resultsPath"] == f"{NS}/sweeps/{NAME}/{status['runEpoch']}"
    assert status["runStates"] == {f"{NAME}-v0-t1": "Completed", f"{NAME}-v1-t1": "Completed"}
    assert status["lastChildEvent"]["phase"] == "Completed" and "currentChildRef" not in status
    aggregate = json.loads((results / status["resultsPath"] / "aggregate.json").read_text())
    sweep_doc = aggregate["sweep_aggregate"]
    assert [c["label"] for c in sweep_doc["per_combination_metrics"]] == ["concurrency_2", "concurrency_4"]
    assert sweep_doc["best_configurations"]["best_throughput"]["label"] == "concurrency_4"
    assert {p["label"] for p in sweep_doc["pareto_optimal"]} == {"concurrency_2", "concurrency_4"}
    assert aggregate["variations"]["concurrency_4"]["metrics"]["request_throughput"]["avg"]["mean"] == 40.0
    assert (results / status["resultsPath"] / "profile_export_aiperf_sweep.csv").read_text().startswith("label,")


async def test_a_partial_harvest_is_retried_and_keeps_the_jobset(kube: FakeKube, client: KubeApi,
                                                                 tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with operator(kube, results_dir=results):
        kube.create(sweep())
        await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Initializing", timeout=20)
        files = {"aggregate.json": b'{"sweep": "sw"}', "profile_export_aiperf_sweep.json": b"{}"}
        fake = sweep_pod(kube, files)
        fake.broken.add("aggregate.json")
        cr = sweep_cr(kube)
        await client.patch(SWEEPS, NS, NAME, [
            {"op": "add", "path": "/status/aggregation", "value": {"phase": "Complete", "message": "done"}}],
            status=True)
        await kube.wait_until(lambda: fake.served.count("aggregate.json") >= 2, timeout=20)
        assert sweep_status(kube)["phase"] == "Initializing" and jobset(kube) is not None
        assert not (results / NS / "sweeps" / NAME / cr["status"]["runEpoch"]).exists()
        fake.broken.clear()
        await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Completed", timeout=20)
        await kube.wait_until(lambda: jobset(kube) is None)


async def test_cancel_mid_sweep_cancels_the_current_child_and_starts_no_other(
        kube: FakeKube, client: KubeApi, tmp_path: Path) -> None:
    async with operator(kube, results_dir=tmp_path / "results"):
        kube.create(sweep())
        await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Initializing", timeout=20)
        sweeper = controller(client, kube, tmp_path / "sc", DictSummaries({}))
        codes: list[int] = []
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                codes.append(await sweeper.run())
            tg.start_soon(run)
            first = f"{NAME}-v0-t1"
            await kube.wait_until(lambda: phase(kube, first) == "Initializing", timeout=20)
            await client.patch(SWEEPS, NS, NAME, [
                {"op": "add", "path": "/spec/cancel", "value": True}])
            await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Cancelled", timeout=20)
            await kube.wait_until(lambda: phase(kube, first) == "Cancelled", timeout=20)
        assert codes == [0]
    assert child(kube, first)["spec"]["cancel"] is True
    assert not child(kube, f"{NAME}-v1-t1")  # the plan stopped at the cancelled child
    conditions = {c["type"]: c for c in sweep_status(kube)["conditions"]}
    assert conditions["Cancelling"]["status"] == "True" and first in conditions["Cancelled"]["message"]
    assert sweep_status(kube)["observedGeneration"] == sweep_cr(kube)["metadata"]["generation"]


async def test_deleting_a_sweep_cancels_only_the_children_it_owns(kube: FakeKube, client: KubeApi) -> None:
    async with operator(kube):
        kube.create(sweep())
        await kube.wait_until(lambda: sweep_status(kube).get("phase") == "Initializing", timeout=20)
        uid = sweep_cr(kube)["metadata"]["uid"]

        def job(name: str, owner_uid: str | None) -> dict[str, Any]:
            body = sweep()
            meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {SWEEP_LABEL: NAME}, "finalizers": ["test.aiperf/hold"]}
            if owner_uid is not None:
                meta["ownerReferences"] = [{"apiVersion": CR_API, "kind": SWEEP_KIND, "name": NAME, "uid": owner_uid,
                                            "controller": True}]
            return {"apiVersion": CR_API, "kind": JOB_KIND, "metadata": meta,
                    "spec": {"benchmark": body["spec"]["benchmark"]}}

        kube.create(job("owned", uid))
        kube.create(job("stale-owner", "0000-older-incarnation"))  # labelled, same name, other UID
        kube.create(job("unowned", None))
        await kube.wait_until(lambda: phase(kube, "owned") == "Initializing", timeout=20)
        await client.delete(SWEEPS, NS, NAME, uid=uid)
        await kube.wait_until(lambda: not sweep_cr(kube), timeout=20)
        await kube.wait_until(lambda: child(kube, "owned").get("spec", {}).get("cancel") is True)
    assert not child(kube, "stale-owner")["spec"].get("cancel") and not child(kube, "unowned")["spec"].get("cancel")


async def test_a_restarted_sweep_controller_replans_identically_and_adopts_its_children(
        kube: FakeKube, client: KubeApi, tmp_path: Path) -> None:
    # No operator: the sweep-controller alone, its children finished by the test.
    kube.create(sweep(values=(2, 4, 8)))
    kube.set_status(CR_API, SWEEP_KIND, NS, NAME, {"phase": "Running"})
    cr = sweep_cr(kube)
    uid = cr["metadata"]["uid"]
    names = [f"{NAME}-v{i}-t1" for i in range(3)]
    summaries = DictSummaries({n: summary(c) for n, c in zip(names, (2, 4, 8), strict=True)})
    work = tmp_path / "sc"
    async with anyio.create_task_group() as tg:  # the first pod: killed while its first child runs
        tg.start_soon(controller(client, kube, work, summaries).run)
        await kube.wait_until(lambda: bool(child(kube, names[0])))
        tg.cancel_scope.cancel()
    first = child(kube, names[0])
    kube.set_status(CR_API, JOB_KIND, NS, names[0], {"phase": "Completed"})
    codes: list[int] = []
    async with anyio.create_task_group() as tg:  # the replacement pod
        async def run() -> None:
            codes.append(await controller(client, kube, work, summaries).run())
        tg.start_soon(run)
        for name in names[1:]:
            await kube.wait_until(partial(has_child, kube, name))
            kube.set_status(CR_API, JOB_KIND, NS, name, {"phase": "Completed"})
    assert codes == [0]
    assert child(kube, names[0])["metadata"]["uid"] == first["metadata"]["uid"]  # adopted, not recreated
    created = kube.requests_for("POST", f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs")
    assert len(created) == 3
    plan = plan_for(decode(cr["spec"]), uid)
    assert [r.seed for r in plan.runs] == [uid_seed(uid)] * 3
    for planned, name in zip(plan.runs, names, strict=True):
        spec = child(kube, name)["spec"]
        assert planned.variation is not None and spec["benchmark"]["random_seed"] == planned.seed
        assert spec["benchmark"]["phases"][0]["concurrency"] == planned.variation.values["phases.profiling.concurrency"]
    aggregate = json.loads((work / "aggregate.json").read_text())
    assert [c["name"] for c in aggregate["children"]] == names


async def test_a_creation_time_without_a_storable_epoch_is_refused_for_good(kube: FakeKube, client: KubeApi) -> None:
    kube.create(sweep())
    body = sweep_cr(kube)
    body["metadata"]["creationTimestamp"] = "1969-04-25T18:22:03Z"
    sweeps = SweepReconciler(api=client, metrics=Metrics(), defaults=Defaults(), clock=lambda: datetime.now(UTC))
    with pytest.raises(kopf.PermanentError, match="no storable run epoch"):
        await sweeps.create(body)
    status = sweep_status(kube)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == "Failed" and conditions["ConfigValid"]["status"] == "True"
    assert conditions["Failed"]["reason"] == "SweepRejected"
    events = [o for _, o in kube.store.all_objects() if o.get("kind") == "Event"]
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "SweepRejected")]
    assert jobset(kube) is None
