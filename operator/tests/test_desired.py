"""What a CR should own, computed without an API server: the builders' objects with owner
references, the envelope mapped onto the deployment settings, one-line errors."""

from __future__ import annotations

from typing import Any

import pytest
from _harness import job

from aiperf.kube import build_all
from aiperf.kuberun.status_push import JobRef
from aiperf.operator.desired import Defaults, InvalidSpec, plan_job, run_config_for


def body(**spec: Any) -> dict[str, Any]:
    out = job(**spec)
    out["metadata"]["uid"] = "u1"
    return out


def test_objects_in_creation_order_each_controlled_by_the_cr() -> None:
    plan = plan_job(body(), defaults=Defaults())
    assert [o["kind"] for o in plan.objects] == ["ServiceAccount", "Role", "RoleBinding", "Secret", "ConfigMap",
                                                 "JobSet"]
    (secret,) = (o for o in plan.objects if o["kind"] == "Secret")
    assert "data" not in secret  # the reconciler fills it with fresh keys at creation, never the plan
    for o in plan.objects:
        assert o["metadata"]["ownerReferences"] == [
            {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob", "name": "run", "uid": "u1",
             "controller": True, "blockOwnerDeletion": True}]
    binding = plan.objects[2]
    assert binding["subjects"][0]["name"] == "aiperf-run"  # the run's own ServiceAccount
    assert plan.settings.total_workers == 2 and plan.settings.workers_per_pod == 1


def test_the_envelope_reaches_the_pods() -> None:
    plan = plan_job(body(image="reg.example/aiperf/all:1", resourceMode="burstable", ttlSecondsAfterFinished=5,
                         secrets={"apiKey": {"name": "llm", "key": "k"}},
                         podTemplate={"serviceAccountName": "runner", "priorityClassName": "batch",
                                      "nodeSelector": {"pool": "bench"},
                                      "env": [{"name": "A", "value": "1"},
                                              {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "b"}}}]}),
                     defaults=Defaults())
    assert [o["kind"] for o in plan.objects][0] == "Role"  # a named ServiceAccount is not created
    jobset = plan.objects[-1]
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 5
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "batch" and pod["nodeSelector"] == {"pool": "bench"}
    assert pod["serviceAccountName"] == "runner"
    assert {c["image"] for c in pod["containers"]} == {"reg.example/aiperf/all:1"}
    # burstable; the results sidecar keeps its small fixed limits (it only serves files)
    # Only the fixed-size helpers (results sidecar, server-metrics manager) carry their own limits.
    assert all("limits" not in c["resources"] for c in pod["containers"]
               if c["name"] not in ("results-sidecar", "server-metrics-manager"))
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["A"]["value"] == "1" and env["B"]["valueFrom"]["secretKeyRef"] == {"name": "s", "key": "b"}
    workers = [c for rj in jobset["spec"]["replicatedJobs"]
               for c in rj["template"]["spec"]["template"]["spec"]["containers"] if c["name"][len("worker-"):].isdigit()]
    assert workers and all({"name": "AIPERF_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "k"}}}
                           in c["env"] for c in workers)


def test_the_controller_pod_names_its_cr_and_no_worker_pod_does() -> None:
    plan = plan_job(body(), defaults=Defaults())
    jobs = {rj["name"]: rj["template"]["spec"]["template"]["spec"]["containers"]
            for rj in plan.objects[-1]["spec"]["replicatedJobs"]}
    cr = {"AIPERF_JOB_NAME": "run", "AIPERF_JOB_NAMESPACE": "bench", "AIPERF_JOB_UID": "u1"}
    for container in jobs.pop("controller"):
        assert {e["name"]: e.get("value") for e in container["env"] if e["name"] in cr} == cr
        assert JobRef.from_env({e["name"]: e["value"] for e in container["env"] if "value" in e}) == JobRef(
            name="run", namespace="bench", uid="u1")
    assert jobs and all(not set(cr) & {e["name"] for e in c["env"]} for cs in jobs.values() for c in cs)
    # direct mode: the same builders without the operator add none of them
    direct = build_all(plan.settings, run_config_for("run", plan.spec))[-1]
    assert not any(set(cr) & {e["name"] for e in c["env"]} for rj in direct["spec"]["replicatedJobs"]
                   for c in rj["template"]["spec"]["template"]["spec"]["containers"])


def test_a_cr_may_not_set_the_variables_naming_it() -> None:
    with pytest.raises(InvalidSpec, match="AIPERF_JOB_UID: set by aiperf"):
        plan_job(body(podTemplate={"env": [{"name": "AIPERF_JOB_UID", "value": "spoofed"}]}), defaults=Defaults())


def test_the_operator_defaults_name_the_images() -> None:
    plan = plan_job(body(), defaults=Defaults(image_registry="reg.example", image_tag="0.3"))
    pod = plan.objects[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert all(c["image"].startswith("reg.example/aiperf/") and c["image"].endswith(":0.3") for c in pod["containers"])


@pytest.mark.parametrize(("spec", "words"), [
    ({"benchmark": {"models": ["m"]}, "workersPerPod": 0}, "spec.workersPerPod"),
    ({"benchmark": {"models": ["m"], "bogus": 1}}, "spec.benchmark"),
    ({"benchmark": {"models": ["m"], "datasets": [{"type": "file", "path": "/x.jsonl", "format": "single_turn"}]}},
     "spec.benchmark"),
])
def test_a_bad_spec_is_one_line_naming_the_field(spec: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidSpec) as exc:
        plan_job({"metadata": {"name": "run", "namespace": "bench", "uid": "u1"}, "spec": spec}, defaults=Defaults())
    assert words in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(("workers", "per_worker", "expected"), [(None, 4, 3), (None, 16, 1), (5, 4, 5), (None, None, 1)])
def test_connections_per_worker_sizes_a_run_without_a_worker_count(workers: int | None, per_worker: int | None,
                                                                  expected: int) -> None:
    spec = job()["spec"]
    spec["benchmark"]["phases"] = [{"type": "concurrency", "name": "warmup", "concurrency": 2, "requests": 4},
                                   {"type": "concurrency", "name": "profiling", "concurrency": 10, "requests": 20}]
    spec["benchmark"]["runtime"] = {"workers": workers} if workers else {}
    if per_worker:
        spec["connectionsPerWorker"] = per_worker
    cr = {**job(), "spec": spec}
    cr["metadata"]["uid"] = "u1"
    assert plan_job(cr, defaults=Defaults(total_workers=1)).settings.total_workers == expected
