"""Issue 23: the operator under what a cluster's admission adds, with real kopf against the fake
API server: JobSet's 63-character pod name rule (a sweep name refused up front, in one line),
and a create the API server refuses as invalid ending the run with `CreateRejected` instead of
being retried forever."""

from __future__ import annotations

import pytest
from _harness import NS, condition, job, operator, phase
from _sweep import sweep, sweep_status

from aiperf.crd.generator import build_crd
from aiperf.crd.model import SWEEP_KIND
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj

pytestmark = pytest.mark.anyio


async def test_a_sweep_name_its_jobset_pods_cannot_carry_fails_at_once_in_one_line(kube: FakeKube) -> None:
    # Issue 23, item 1: 37 characters; JobSet's webhook would refuse the sweep's JobSet forever.
    kube.install_crd(build_crd(SWEEP_KIND))
    name = "llama-3-8b-instruct-concurrency-sweep"
    async with operator(kube):
        kube.create(sweep(name))
        await kube.wait_until(lambda: sweep_status(kube, name).get("phase") == "Failed", timeout=20)
    cond = next(c for c in sweep_status(kube, name)["conditions"] if c["type"] == "ConfigValid")
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    assert "would exceed 63 characters" in cond["message"] and "use at most 36 characters" in cond["message"]
    assert "\n" not in cond["message"]
    assert kube.requests_for("POST", "/apis/jobset.x-k8s.io") == []


async def test_the_longest_sweep_name_passes_jobsets_webhook(kube: FakeKube) -> None:
    kube.install_crd(build_crd(SWEEP_KIND))
    name = "s" * 29  # its first child, <name>-v0-t1, is a run name of 35, the limit of every run
    async with operator(kube):
        kube.create(sweep(name))
        await kube.wait_until(lambda: sweep_status(kube, name).get("phase") == "Initializing", timeout=20)
    assert kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", NS, f"aiperf-sweep-{name}") is not None


class RefuseJobSets:
    """A policy engine's validating webhook that refuses every JobSet (422)."""

    def applies(self, info: KindInfo) -> bool:
        return info.kind == "JobSet"

    def mutate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        return None

    def validate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        raise ApiError.invalid(info, obj["metadata"]["name"], "spec: Invalid value: policy forbids JobSets here")


async def test_a_create_refused_as_invalid_fails_the_run_with_the_apis_message(kube: FakeKube) -> None:
    kube.add_webhook(RefuseJobSets())
    async with operator(kube):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Failed", timeout=20)
        cond = condition(kube, "ResourcesCreated")
        assert (cond["status"], cond["reason"]) == ("False", "CreateRejected")
        assert cond["message"].startswith("JobSet aiperf-run: 422 Invalid: ")
        assert "policy forbids JobSets here" in cond["message"]
    assert len(kube.requests_for("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets")) == 1
