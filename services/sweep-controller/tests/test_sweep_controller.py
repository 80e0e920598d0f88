"""The sweep-controller alone against the fake API server (the operator's part is in
operator/tests/test_sweep_flow.py): children one after another with the plan's cooldowns, a
variation below minRuns, an invalid variation, a foreign object under a child's name, and the
entry point's one-line errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiperf.config.markers import END_MARKER
from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.kubeapi import KubeApi
from aiperf.kuberun.sweep_plan import RUN_DIGEST_ANNOTATION
from aiperf.kuberun.sweeps import SWEEPS, ForeignChild
from aiperf.sweep_controller.controller import EXIT_BAD_SPEC, SweepController
from aiperf.sweep_controller.main import main
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio
API, NS = "aiperf.nvidia.com/v1alpha1", "bench"


def sweep(values: list[int], **extra: Any) -> dict[str, Any]:
    bench = {"models": ["m"], "endpoint": {"urls": ["http://llm.example:8000"]},
             "phases": [{"type": "concurrency", "name": "profiling", "concurrency": 1, "requests": 4}]}
    return {"apiVersion": API, "kind": SWEEP_KIND, "metadata": {"name": "s", "namespace": NS},
            "spec": {"benchmark": bench, "sweep": {"parameters": {"phases.profiling.concurrency": values},
                                                   "cooldownSeconds": 7}, **extra}}


def summary(c: int) -> dict[str, Any]:
    return {"request_throughput": {"unit": "requests/sec", "avg": float(c)},
            "request_latency": {"unit": "ms", "avg": 10.0 * c, "p99": 20.0 * c}}


class Summaries:
    def __init__(self, docs: dict[str, dict[str, Any] | None]) -> None:
        self.docs = docs

    async def fetch(self, child: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.docs.get(child["metadata"]["name"])


def stored(kube: FakeKube, kind: str, name: str) -> dict[str, Any]:
    obj = kube.get(API, kind, NS, name)
    assert obj is not None, name
    return obj


def exists(kube: FakeKube, name: str) -> bool:
    return kube.get(API, JOB_KIND, NS, name) is not None


def make(api: KubeApi, kube: FakeKube, tmp: Path, docs: dict[str, dict[str, Any] | None],
         sleeps: list[float]) -> SweepController:
    uid = stored(kube, SWEEP_KIND, "s")["metadata"]["uid"]

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return SweepController(api=api, namespace=NS, name="s", uid=uid, artifact_dir=tmp, summaries=Summaries(docs),
                           poll_s=0.02, sleep=sleep)


async def finish_children(kube: FakeKube, phases: dict[str, str]) -> None:
    for name, phase in phases.items():
        await kube.wait_until(partial(exists, kube, name))
        assert all(kube.get(API, JOB_KIND, NS, later) is None for later in list(phases)[list(phases).index(name) + 1:])
        kube.set_status(API, JOB_KIND, NS, name, {"phase": phase})


async def test_children_run_one_after_another_and_a_variation_below_min_runs_is_named(
        kube: FakeKube, api: KubeApi, tmp_path: Path) -> None:
    kube.create(sweep([1, 2, 3], multiRun={"numRuns": 2, "minRuns": 2}))
    names = [f"s-v{v}-t{t}" for t in (1, 2) for v in (0, 1, 2)]
    docs: dict[str, dict[str, Any] | None] = {n: summary(int(n[3]) + 1) for n in names}
    docs["s-v2-t2"] = None  # its summary is lost: variation 2 has one successful trial
    sleeps: list[float] = []
    codes: list[int] = []
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            codes.append(await make(api, kube, tmp_path, docs, sleeps).run())
        tg.start_soon(run)
        await finish_children(kube, {n: "Completed" for n in names})
    assert codes == [0] and sleeps == [7, 7, 7, 7]  # between variations; the trial cooldown is 0
    status = stored(kube, SWEEP_KIND, "s")["status"]["aggregation"]
    assert status["phase"] == "Complete" and status["failedVariations"] == ["concurrency_3"]
    aggregate = json.loads((tmp_path / "aggregate.json").read_text())
    assert aggregate["variations"]["concurrency_3"]["failed_runs"] == [2]
    assert [c["exit_code"] for c in aggregate["children"]] == [0, 0, 0, 0, 0, 1]
    assert json.loads((tmp_path / END_MARKER).read_text())["exit_code"] == 0


async def test_an_invalid_variation_fails_the_sweep_before_any_child(kube: FakeKube, api: KubeApi,
                                                                     tmp_path: Path) -> None:
    kube.create(sweep([2, 0]))
    assert await make(api, kube, tmp_path, {}, []).run() == EXIT_BAD_SPEC
    aggregation = stored(kube, SWEEP_KIND, "s")["status"]["aggregation"]
    assert aggregation["phase"] == "Failed" and "concurrency_0" in aggregation["message"]
    assert kube.requests_for("POST", f"/apis/{API}/namespaces/{NS}/aiperfjobs") == []


async def test_a_foreign_object_under_a_childs_name_is_never_adopted(kube: FakeKube, api: KubeApi,
                                                                     tmp_path: Path) -> None:
    kube.create(sweep([2]))
    kube.create({"apiVersion": API, "kind": JOB_KIND, "metadata": {"name": "s-v0-t1", "namespace": NS},
                 "spec": {"benchmark": sweep([2])["spec"]["benchmark"]}})
    with pytest.raises(ForeignChild, match="is not a child of AIPerfSweep s"):
        await make(api, kube, tmp_path, {}, []).run()


async def test_a_restarted_controller_adopts_its_children_and_refuses_another_plan(
        kube: FakeKube, api: KubeApi, tmp_path: Path) -> None:
    """The first incarnation creates child v0 and dies (its task cancelled, as a killed pod);
    the second replans the same runs: same plan digest, v0 adopted (never created twice), v1
    created. A child whose run digest is not the replanned one stops the sweep (exit 2)."""
    kube.create(sweep([1, 2]))
    docs = {"s-v0-t1": summary(1), "s-v1-t1": summary(2)}
    async with anyio.create_task_group() as tg:
        tg.start_soon(make(api, kube, tmp_path / "first", docs, []).run)
        await kube.wait_until(partial(exists, kube, "s-v0-t1"))
        tg.cancel_scope.cancel()
    first = stored(kube, SWEEP_KIND, "s")["status"]["aggregation"]
    v0_uid = stored(kube, JOB_KIND, "s-v0-t1")["metadata"]["uid"]
    codes: list[int] = []
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            codes.append(await make(api, kube, tmp_path / "second", docs, []).run())
        tg.start_soon(run)
        await finish_children(kube, {"s-v0-t1": "Completed", "s-v1-t1": "Completed"})
    assert codes == [0]
    done = stored(kube, SWEEP_KIND, "s")["status"]["aggregation"]
    assert done["phase"] == "Complete" and done["planDigest"] == first["planDigest"], (first, done)
    assert stored(kube, JOB_KIND, "s-v0-t1")["metadata"]["uid"] == v0_uid
    posts = [r.body["metadata"]["name"] for r in kube.requests_for("POST", f"/apis/{API}/namespaces/{NS}/aiperfjobs")]
    assert posts == ["s-v0-t1", "s-v1-t1"], posts

    v1 = stored(kube, JOB_KIND, "s-v1-t1")
    v1["metadata"]["annotations"][RUN_DIGEST_ANNOTATION] = "0" * 16
    kube.update(v1)
    assert await make(api, kube, tmp_path / "third", docs, []).run() == EXIT_BAD_SPEC
    failed = stored(kube, SWEEP_KIND, "s")["status"]["aggregation"]
    assert failed["phase"] == "Failed" and "s-v1-t1 was created from another plan" in failed["message"], failed


async def test_a_recorded_plan_digest_that_differs_fails_the_sweep(kube: FakeKube, api: KubeApi,
                                                                   tmp_path: Path) -> None:
    kube.create(sweep([1, 2]))
    kube.set_status(API, SWEEP_KIND, NS, "s", {"aggregation": {"phase": "Running", "planDigest": "f" * 16}})
    assert await make(api, kube, tmp_path, {}, []).run() == EXIT_BAD_SPEC
    aggregation = stored(kube, SWEEP_KIND, "s")["status"]["aggregation"]
    assert aggregation["phase"] == "Failed" and "replanned differently" in aggregation["message"], aggregation
    assert kube.requests_for("POST", f"/apis/{API}/namespaces/{NS}/aiperfjobs") == []


def test_main_without_the_operators_environment_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AIPERF_SWEEP_NAME", "AIPERF_SWEEP_NAMESPACE", "AIPERF_SWEEP_UID"):
        monkeypatch.delenv(var, raising=False)
    assert main(["--artifact-dir", "/tmp/x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "AIPERF_SWEEP_NAME" in err


async def test_a_sweep_being_deleted_creates_no_further_child(kube: FakeKube, api: KubeApi, tmp_path: Path) -> None:
    """Deleted while its first child runs (the operator's finalizer still holds it): that child
    ends (here Failed, as a child torn down with it may look) and no second child is created."""
    obj = sweep([1, 2])
    obj["metadata"]["finalizers"] = ["aiperf.nvidia.com/test-holds"]
    kube.create(obj)
    codes: list[int] = []
    with anyio.fail_after(30):  # without the check it would wait on a second child forever
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                codes.append(await make(api, kube, tmp_path, {}, []).run())
            tg.start_soon(run)
            await kube.wait_until(partial(exists, kube, "s-v0-t1"))
            await api.delete(SWEEPS, NS, "s", uid=stored(kube, SWEEP_KIND, "s")["metadata"]["uid"])
            assert stored(kube, SWEEP_KIND, "s")["metadata"].get("deletionTimestamp")
            kube.set_status(API, JOB_KIND, NS, "s-v0-t1", {"phase": "Failed"})
    assert codes == [0] and not exists(kube, "s-v1-t1")
