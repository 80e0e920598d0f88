"""`aiperf kube sweep` and `--kind sweep` on the other kube commands (issue 12, item 5), against the
fake API server with both CRDs: the AIPerfSweep submitted is the one `--dry-run` prints, valid
for the CRD and planned before submission; cancel, delete, list and the child selectors (-v/-t)
act on the sweep's objects only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml

from aiperf.cli.kube_sweep import FIELD_PATHS
from aiperf.cli.sweep_options import SWEEPABLE
from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.crd.validation import validate_resource
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
API = "aiperf.nvidia.com/v1alpha1"
BENCH = ("--model", "m", "--url", "http://llm.example:8000", "--request-count", "10")
Run = Callable[..., Awaitable[Any]]


@pytest.fixture
def crds(kube: FakeKube) -> FakeKube:
    kube.install_crd(build_crd(JOB_KIND))
    kube.install_crd(build_crd(SWEEP_KIND))
    return kube


def stored(kube: FakeKube, kind: str, name: str) -> dict[str, Any]:
    obj = kube.get(API, kind, NS, name)
    assert obj is not None, name
    return obj


def target(kube: FakeKube) -> tuple[str, ...]:
    return ("--kubeconfig", kube.kubeconfig_path, "-n", NS)


def test_every_sweepable_flag_has_a_path_in_the_aiperfsweep() -> None:
    assert {field for field, _ in SWEEPABLE.values()} == set(FIELD_PATHS)


async def test_dry_run_prints_a_valid_aiperfsweep_and_calls_nothing(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "sweep", *BENCH, "--name", "sw", "--concurrency", "2,4,8", "--isl", "64,128",
                          "--sweep-type", "grid", "--cooldown", "5", "--trials", "3", "--min-runs", "2",
                          "--dry-run", *target(kube))
    assert result.code == 0, result.err
    assert kube.requests == [] and "18 runs" in result.err  # 3 x 2 variations x 3 trials
    (body,) = list(yaml.safe_load_all(result.out))
    assert (body["kind"], body["metadata"]["name"]) == (SWEEP_KIND, "sw") and validate_resource(body) == []
    spec = body["spec"]
    assert spec["sweep"] == {"type": "grid", "cooldownSeconds": 5.0, "parameters": {
        "phases.profiling.concurrency": [2, 4, 8], "datasets.main.prompts.isl.mean": [64, 128]}}
    assert spec["multiRun"] == {"numRuns": 3, "minRuns": 2}
    assert spec["benchmark"]["phases"][0]["concurrency"] == 2  # the first value in the base benchmark


@pytest.mark.parametrize(("extra", "message"), [
    (("--concurrency", "2,4", "--max-runs", "1"), "--max-runs 1: the sweep plans 2 runs"),
    (("--concurrency", "4"), "give at least one comma list"),
    (("--concurrency", "2,4", "--min-runs", "2"), "minRuns: at most numRuns"),
    (("--concurrency", "2,0"), "concurrency_0"),
])
async def test_a_sweep_that_cannot_run_is_refused_before_submission(aiperf: Run, crds: FakeKube,
                                                                    extra: tuple[str, ...], message: str) -> None:
    result = await aiperf("kube", "sweep", *BENCH, "--name", "sw", *extra, *target(crds))
    assert result.code == 2 and message in result.err, result.err
    assert crds.requests_for("POST") == []


async def test_detach_creates_the_sweep_and_returns(aiperf: Run, crds: FakeKube) -> None:
    result = await aiperf("kube", "sweep", *BENCH, "--name", "sw", "--concurrency", "2,4", "--detach", *target(crds))
    assert result.code == 0, result.err
    assert stored(crds, SWEEP_KIND, "sw")["spec"]["sweep"]["parameters"] == {"phases.profiling.concurrency": [2, 4]}
    again = await aiperf("kube", "sweep", *BENCH, "--name", "sw", "--concurrency", "2,4", "--detach", *target(crds))
    assert again.code == 2 and "already exists" in again.err


def child(kube: FakeKube, name: str, owner: dict[str, Any], *, variation: int, trial: int) -> dict[str, Any]:
    meta = owner["metadata"]
    return kube.create({"apiVersion": API, "kind": JOB_KIND, "metadata": {
        "name": name, "namespace": NS, "labels": {"aiperf.nvidia.com/sweep": meta["name"]},
        "ownerReferences": [{"apiVersion": API, "kind": SWEEP_KIND, "name": meta["name"], "uid": meta["uid"],
                             "controller": True}]},
        "spec": {"benchmark": owner["spec"]["benchmark"]}})


async def test_cancel_list_and_delete_understand_sweeps(aiperf: Run, crds: FakeKube) -> None:
    assert (await aiperf("kube", "sweep", *BENCH, "--name", "sw", "--concurrency", "2,4", "--detach",
                         *target(crds))).code == 0
    sweep = crds.get(API, SWEEP_KIND, NS, "sw")
    assert sweep is not None
    child(crds, "sw-v0-t1", sweep, variation=0, trial=1)
    child(crds, "sw-v1-t1", sweep, variation=1, trial=1)
    crds.set_status(API, SWEEP_KIND, NS, "sw", {"phase": "Running", "totalRuns": 2, "completedRuns": 1,
                                                "currentChild": "sw-v1-t1"})
    listed = await aiperf("kube", "list", "--kind", "sweep", *target(crds))
    assert listed.code == 0, listed.err
    assert listed.out.split("\n")[1].split()[:4] == ["sw", "Running", "1/2", "sw-v1-t1"]

    one = await aiperf("kube", "cancel", "sw", "--kind", "sweep", "-v", "0", "-t", "1", *target(crds))
    assert one.code == 0, one.err
    assert stored(crds, JOB_KIND, "sw-v0-t1")["spec"]["cancel"] is True
    assert not stored(crds, JOB_KIND, "sw-v1-t1")["spec"].get("cancel")
    assert not stored(crds, SWEEP_KIND, "sw")["spec"].get("cancel")

    whole = await aiperf("kube", "cancel", "sw", "--kind", "sweep", *target(crds))
    assert whole.code == 0 and stored(crds, SWEEP_KIND, "sw")["spec"]["cancel"] is True

    missing = await aiperf("kube", "cancel", "sw", "--kind", "sweep", "-v", "7", *target(crds))
    assert missing.code == 2 and "sw-v7-t1" in missing.err

    wrong_uid = await aiperf("kube", "delete", "sw", "--kind", "sweep", "--uid", "not-it", *target(crds))
    assert wrong_uid.code == 1 and crds.get(API, SWEEP_KIND, NS, "sw") is not None
    gone = await aiperf("kube", "delete", "sw", "--kind", "sweep", "--uid", sweep["metadata"]["uid"], *target(crds))
    assert gone.code == 0, gone.err
    await crds.wait_until(lambda: crds.get(API, SWEEP_KIND, NS, "sw") is None)


async def test_the_child_selectors_need_kind_sweep_and_sane_numbers(aiperf: Run, crds: FakeKube) -> None:
    for argv, message in ((("-v", "1"), "add --kind sweep"), (("--kind", "sweep", "-t", "0"), "trials count from 1"),
                          (("--kind", "sweep", "-v", "-1"), "variations count from 0")):
        result = await aiperf("kube", "results", "sw", "--from-pods", *argv, *target(crds))
        assert result.code == 2 and message in result.err, result.err
    no_current = await aiperf("kube", "attach", "nosuch", "--kind", "sweep", *target(crds))
    assert no_current.code == 2 and "no AIPerfSweep nosuch" in no_current.err


async def test_results_of_a_sweep_are_its_aggregate(aiperf: Run, crds: FakeKube, tmp_path: Any) -> None:
    from aiperf.testing.fake_sidecar import FakeSidecar

    assert (await aiperf("kube", "sweep", *BENCH, "--name", "sw", "--concurrency", "2,4", "--detach",
                         *target(crds))).code == 0
    early = await aiperf("kube", "results", "sw", "--kind", "sweep", *target(crds))
    assert early.code == 1 and "no aggregate yet" in early.err
    crds.set_status(API, SWEEP_KIND, NS, "sw", {"phase": "Running", "aggregation": {"phase": "Complete"}})
    pod = "aiperf-sweep-sw-ctl-0-0-x"
    crds.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": "aiperf-sweep-sw"}}, "spec": {"containers": [
            {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    crds.run_pod(NS, pod)
    files = {"aggregate.json": b"{}", "profile_export_aiperf_sweep.json": b"{}",
             "profile_export_aiperf_sweep.csv": b"label\n"}
    crds.register_proxy(NS, pod, 9091, FakeSidecar(files))
    got = await aiperf("kube", "results", "sw", "--kind", "sweep", "--artifact-dir", str(tmp_path), *target(crds))
    assert got.code == 0, got.err
    assert {p.name: p.read_bytes() for p in (tmp_path / "sw").iterdir()} == files
    crds.set_status(API, SWEEP_KIND, NS, "sw", {"phase": "Completed", "resultsAvailable": True, "runEpoch": "1790000000",
                                                "resultsPath": "bench/sweeps/sw/1790000000"})
    done = await aiperf("kube", "results", "sw", "--kind", "sweep", *target(crds))
    assert done.code == 0 and "bench/sweeps/sw/1790000000" in done.out


async def test_a_sweep_name_its_jobset_cannot_carry_is_refused_in_one_line(aiperf: Run, crds: FakeKube,
                                                                           tmp_path: Any) -> None:
    # JobSet's webhook refuses `aiperf-sweep-<name>-ctl-0-0-xxxxx` over 63 characters.
    result = await aiperf("kube", "sweep", *BENCH, "--name", "llama-3-8b-instruct-concurrency-sweep", "--concurrency", "2,4",
                          *target(crds))
    assert result.code == 2 and crds.requests_for("POST") == []
    assert "would exceed 63 characters" in result.err and "use at most 35 characters" in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    manifest = tmp_path / "sweep.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": API, "kind": SWEEP_KIND,
                                        "metadata": {"name": "llama-3-8b-instruct-concurrency-sweep"},
                                        "spec": {"benchmark": {"models": ["m"]}}}))
    result = await aiperf("kube", "validate", str(manifest))
    assert result.code == 1 and "metadata.name: too long" in result.out, result.out
