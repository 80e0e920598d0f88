"""What a CR should own, computed without an API server: the builders' objects with owner
references, the envelope mapped onto the deployment settings, one-line errors."""

from __future__ import annotations

from typing import Any

import pytest
from _harness import job

from aiperf.config import FileDataset
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
                         imagePullPolicy="Always",
                         podTemplate={"serviceAccountName": "runner", "priorityClassName": "batch",
                                      "nodeSelector": {"pool": "bench"},
                                      "env": [{"name": "A", "value": "1"},
                                              {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "b"}}},
                                              {"name": "AIPERF_INJECTED_API_KEY",
                                               "valueFrom": {"secretKeyRef": {"name": "llm", "key": "k"}}}]}),
                     defaults=Defaults())
    assert [o["kind"] for o in plan.objects][0] == "Role"  # a named ServiceAccount is not created
    jobset = plan.objects[-1]
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 5
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "batch" and pod["nodeSelector"] == {"pool": "bench"}
    assert pod["serviceAccountName"] == "runner"
    assert {c["image"] for c in pod["containers"]} == {"reg.example/aiperf/all:1"}
    assert {c["imagePullPolicy"] for c in pod["containers"]} == {"Always"}
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
    # the endpoint's Secret goes to the workers only, under our name
    assert "AIPERF_INJECTED_API_KEY" not in env and "AIPERF_API_KEY" not in env


def test_user_files_reach_the_run_with_their_variables_and_the_control_plane_knows_its_namespace() -> None:
    spec = body(variables={"label": "dense", "n": 4, "total": "{{ n * 8 }}"})
    spec["spec"]["benchmark"]["artifacts"] = {"userFiles": [
        {"path": "meta.json", "content": {"label": "{{ label }}", "total": "{{ total }}", "job": "{{ job_name }}"}}]}
    plan = plan_job(spec, defaults=Defaults())
    config = run_config_for("run", plan.spec)
    assert config.benchmark.variables == {"label": "dense", "n": 4, "total": 32}
    (entry,) = config.benchmark.artifacts.user_files
    assert entry.content == {"label": "{{ label }}", "total": "{{ total }}", "job": "{{ job_name }}"}  # at the run's start
    pod = plan.objects[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (control,) = (c for c in pod["containers"] if c["name"] == "control-plane")
    assert {"name": "AIPERF_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in control["env"]


def test_the_pod_template_takes_effect_in_every_pod_and_container() -> None:
    template = {"volumes": [{"name": "cache", "persistentVolumeClaim": {"claimName": "hf"}}],
                "volumeMounts": [{"name": "cache", "mountPath": "/models", "readOnly": True}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
                "podSecurityContext": {"runAsNonRoot": True, "fsGroup": 1000},
                "containerSecurityContext": {"readOnlyRootFilesystem": True},
                "initContainers": [{"name": "fetch", "image": "busybox:1.36", "command": ["true"]}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
                "hostAliases": [{"ip": "10.0.0.5", "hostnames": ["llm.internal"]}], "dnsPolicy": "ClusterFirst",
                "terminationGracePeriodSeconds": 20, "runtimeClassName": "gvisor", "schedulerName": "bench",
                "extraPodSpec": {"hostname": "bench"}}
    plan = plan_job(body(podTemplate=template, keepFailedPods=True), defaults=Defaults())
    jobset = plan.objects[-1]
    assert "ttlSecondsAfterFinished" not in jobset["spec"]  # keepFailedPods: the pods stay until the CR goes
    pods = [rj["template"]["spec"]["template"]["spec"] for rj in jobset["spec"]["replicatedJobs"]]
    assert len(pods) == 2
    for pod in pods:
        assert {"name": "cache", "persistentVolumeClaim": {"claimName": "hf"}} in pod["volumes"]
        assert pod["affinity"] == template["affinity"] and pod["initContainers"] == template["initContainers"]
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
                                          "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 1000}
        assert (pod["hostAliases"], pod["dnsPolicy"], pod["terminationGracePeriodSeconds"], pod["runtimeClassName"],
                pod["schedulerName"], pod["hostname"]) == (template["hostAliases"], "ClusterFirst", 20, "gvisor",
                                                           "bench", "bench")
        assert pod["topologySpreadConstraints"] == template["topologySpreadConstraints"]
        for container in pod["containers"]:
            assert {"name": "cache", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False


TRACE_PVC = {"volumes": [{"name": "perf-cache", "persistentVolumeClaim": {"claimName": "perf-cache"}}],
             "volumeMounts": [{"name": "perf-cache", "mountPath": "/perf-cache"}]}


def test_a_dataset_file_on_a_volume_the_pods_mount_is_read_where_it_is_mounted() -> None:
    """AIPerf's recipes: a trace on a PVC, mounted through podTemplate; the dataset-manager (in the
    controller pod, every container of which mounts it) reads it there."""
    spec = body(podTemplate=TRACE_PVC)
    spec["spec"]["benchmark"] = {"model": "m", "dataset": {"type": "file", "path": "/perf-cache/traces/t.jsonl",
                                                           "format": "mooncake_trace"},
                                 "profiling": {"type": "fixed_schedule"}}
    plan = plan_job(spec, defaults=Defaults())
    dataset = run_config_for("run", plan.spec).benchmark.dataset
    assert isinstance(dataset, FileDataset) and dataset.path == "/perf-cache/traces/t.jsonl"
    controller = plan.objects[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (manager,) = (c for c in controller["containers"] if c["name"] == "dataset-manager")
    assert {"name": "perf-cache", "mountPath": "/perf-cache"} in manager["volumeMounts"]


@pytest.mark.parametrize("path", ["/elsewhere/t.jsonl", "traces/t.jsonl", "/perf-cachex/t.jsonl"])
def test_a_dataset_file_on_no_mounted_volume_is_refused_naming_it(path: str) -> None:
    spec = body(podTemplate=TRACE_PVC)
    spec["spec"]["benchmark"] = {"model": "m", "dataset": {"type": "file", "path": path, "format": "single_turn"}}
    with pytest.raises(InvalidSpec) as exc:
        plan_job(spec, defaults=Defaults())
    assert str(exc.value).startswith(f"spec.benchmark.datasets[0].path: {path}: not on a volume the pods mount; ")


@pytest.mark.parametrize(("template", "words"), [
    ({"volumes": [{"name": "ipc", "emptyDir": {}}]}, "volumes 'ipc': the name of one of aiperf's own volumes"),
    ({"volumes": [{"name": "v", "emptyDir": {}}], "volumeMounts": [{"name": "v", "mountPath": "/aiperf/x"}]},
     "volumeMounts 'v': /aiperf/x is where aiperf mounts its own volumes"),
    ({"containerSecurityContext": {"privileged": True}}, "privileged and allowPrivilegeEscalation are refused"),
])
def test_a_pod_template_that_would_break_the_pods_is_refused(template: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidSpec, match=words):
        plan_job(body(podTemplate=template), defaults=Defaults())


def test_resource_mode_none_sets_no_resources_and_timeout_zero_is_none() -> None:
    plan = plan_job(body(resourceMode="none", timeoutSeconds=0), defaults=Defaults())
    pod = plan.objects[-1]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert all(c["resources"] == {} for c in pod["containers"])


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
    ({"benchmark": {"models": ["m"]}, "connectionsPerWorker": 0}, "spec.connectionsPerWorker"),
    ({"benchmark": {"models": ["m"], "bogus": 1}}, "spec.benchmark"),
    ({"benchmark": {"models": ["m"], "datasets": [{"type": "file", "path": "/x.jsonl", "format": "single_turn"}]}},
     "spec.benchmark"),
])
def test_a_bad_spec_is_one_line_naming_the_field(spec: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidSpec) as exc:
        plan_job({"metadata": {"name": "run", "namespace": "bench", "uid": "u1"}, "spec": spec}, defaults=Defaults())
    assert words in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(("workers", "per_worker", "runtime", "expected"), [
    (None, 4, {}, 3), (None, 16, {}, 1), (5, 4, {}, 5), (None, None, {}, 1),
    (None, 1, {}, 10),  # 10 workers: one pod of 10 (AIPerf's default workers per pod)
    (None, 1, {"workersPerPod": 4}, 12),  # needs 10, rounded up to whole pods of 4
    (None, None, {"workersMin": 3}, 3), (7, 1, {"workersPerPod": 4}, 7),  # a given total is taken as written
])
def test_connections_per_worker_sizes_a_run_without_a_worker_count(workers: int | None, per_worker: int | None,
                                                                  runtime: dict[str, Any], expected: int) -> None:
    spec = job()["spec"]
    spec["benchmark"]["phases"] = [{"type": "concurrency", "name": "warmup", "concurrency": 2, "requests": 4},
                                   {"type": "concurrency", "name": "profiling", "concurrency": 10, "requests": 20}]
    spec["benchmark"]["runtime"] = {**({"workers": workers} if workers else {}), **runtime}
    if per_worker:
        spec["connectionsPerWorker"] = per_worker
    cr = {**job(), "spec": spec}
    cr["metadata"]["uid"] = "u1"
    assert plan_job(cr, defaults=Defaults()).settings.total_workers == expected
