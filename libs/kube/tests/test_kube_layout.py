"""Worker layout, service ids, addressing and images agree with what the services expect."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiperf.config import RunConfig
from aiperf.kube import CONFIG_KEY, KubeSettings, WorkerLayout, build_config_map, build_jobset
from aiperf.kube.containers import JOB_INDEX_ARG
from aiperf.messages import ServiceType


@pytest.mark.parametrize(("total", "per_pod", "pods", "per", "last"), [
    (20, 10, 2, 10, None), (25, 10, 3, 10, 5), (3, 10, 1, 3, None), (1, 1, 1, 1, None), (11, 10, 2, 10, 1)])
def test_split(total: int, per_pod: int, pods: int, per: int, last: int | None) -> None:
    layout = WorkerLayout.split(total_workers=total, workers_per_pod=per_pod, record_processors_per_pod=1)
    assert (layout.pods, layout.workers_per_pod, layout.last_pod_workers) == (pods, per, last)
    assert layout.total_workers == total


def test_record_processors_default_to_a_quarter_of_the_workers() -> None:
    assert KubeSettings(name="a", workers_per_pod=10).record_processors_per_group == 2
    assert KubeSettings(name="a", workers_per_pod=3).record_processors_per_group == 1
    assert KubeSettings(name="a", record_processors_per_pod=5).record_processors_per_group == 5


def _service_ids(jobset: dict) -> dict[str, list[str]]:
    """Ids per container image type, with each job's index substituted like Kubernetes does."""
    ids: dict[str, list[str]] = {}
    for rjob in jobset["spec"]["replicatedJobs"]:
        for index in range(rjob["replicas"]):
            for c in rjob["template"]["spec"]["template"]["spec"]["containers"]:
                if c["name"] in ("results-sidecar", "server-metrics-manager"):  # not registered services
                    continue
                service = c["image"].rsplit("/", 1)[1].split(":")[0]
                service_id = c["args"][c["args"].index("--service-id") + 1]
                ids.setdefault(service, []).append(service_id.replace(JOB_INDEX_ARG, str(index)))
    return ids


def _planned_ids(counts: dict) -> dict[str, list[str]]:
    """The ids the system-controller plans (plan.py), honouring the proposed last_group_workers."""
    groups = counts["worker_groups"]
    last = counts.get("last_group_workers") or counts["workers_per_group"]
    per_group = [counts["workers_per_group"]] * (groups - 1) + [last]
    singletons = [t for t in ServiceType if t not in (
        ServiceType.WORKER, ServiceType.RECORD_PROCESSOR, ServiceType.WORKER_GROUP_MANAGER)]
    ids = {str(t): [str(t)] for t in singletons}
    ids["worker-group-manager"] = [f"worker-group-manager-g{g}" for g in range(groups)]
    ids["worker"] = [f"worker-g{g}-{i}" for g in range(groups) for i in range(per_group[g])]
    ids["record-processor"] = [f"record-processor-g{g}-{j}" for g in range(groups)
                               for j in range(counts["record_processors_per_group"])]
    return ids


@given(total=st.integers(1, 80), per_pod=st.integers(1, 12), rps=st.none() | st.integers(1, 3))
def test_pods_hold_exactly_the_planned_services(total: int, per_pod: int, rps: int | None,
                                                run_config_of) -> None:
    settings = KubeSettings(name="ids", total_workers=total, workers_per_pod=per_pod,
                            record_processors_per_pod=rps)
    run_config = run_config_of()
    counts = msgspec.json.decode(build_config_map(settings, run_config)["data"][CONFIG_KEY])["services"]
    ids = _service_ids(build_jobset(settings, run_config))
    planned = _planned_ids(counts)
    assert {k: sorted(v) for k, v in ids.items()} == {k: sorted(v) for k, v in planned.items()}
    assert len(ids["worker"]) == total


def test_group_id_follows_the_job_index_and_the_last_pod_is_literal(uneven) -> None:
    jobs = {r["name"]: r for r in build_jobset(*uneven)["spec"]["replicatedJobs"]}
    assert (jobs["workers"]["replicas"], jobs["workers-last"]["replicas"]) == (2, 1)
    full = jobs["workers"]["template"]["spec"]["template"]["spec"]["containers"]
    last = jobs["workers-last"]["template"]["spec"]["template"]["spec"]["containers"]
    assert full[1]["args"][-2:] == ["--group-id", "g$(AIPERF_JOB_INDEX)"]
    assert {"name": "AIPERF_JOB_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['jobset.sigs.k8s.io/job-index']"}}} in full[1]["env"]
    assert last[1]["args"][-2:] == ["--group-id", "g2"]
    assert [c["name"] for c in last] == ["worker-group-manager", "record-processor-0", "record-processor-1",
                                         "record-processor-2", *(f"worker-{i}" for i in range(5))]


def test_config_map_is_the_cluster_run_config(uneven) -> None:
    settings, run_config = uneven
    text = build_config_map(settings, run_config)["data"][CONFIG_KEY]
    config = msgspec.json.decode(text, type=RunConfig)
    assert config.kubernetes is True
    comms = config.comms
    assert (comms.tcp_bind_host, comms.ports, comms.ipc_dir) == ("0.0.0.0", {}, "/aiperf/ipc")
    assert config.artifact_dir == "/aiperf/artifacts"
    assert config.benchmark == run_config.benchmark and config.run_id == run_config.run_id
    services = msgspec.json.decode(text)["services"]
    assert services == {"worker_groups": 3, "workers_per_group": 10, "record_processors_per_group": 3,
                        "last_group_workers": 5}


def test_worker_pods_reach_the_controller_by_its_jobset_hostname(typical) -> None:
    jobset = build_jobset(*typical)
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "aiperf-llama-c64",
                                         "publishNotReadyAddresses": True}
    jobs = {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}
    for c in jobs["workers"]["template"]["spec"]["template"]["spec"]["containers"]:
        host = "aiperf-llama-c64-controller-0-0.aiperf-llama-c64"
        assert {"name": "AIPERF_CONTROLLER_HOST", "value": host} in c["env"]
    for c in jobs["controller"]["template"]["spec"]["template"]["spec"]["containers"]:
        assert all(e["name"] != "AIPERF_CONTROLLER_HOST" for e in c["env"])
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["controller"]}


def test_controller_pod_runs_the_six_control_services_and_the_results_sidecar(typical) -> None:
    jobs = {r["name"]: r for r in build_jobset(*typical)["spec"]["replicatedJobs"]}
    containers = jobs["controller"]["template"]["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["control-plane", "event-bus-proxy", "records-manager",
                                               "timing-manager", "dataset-manager", "api", "results-sidecar",
                                               "server-metrics-manager"]
    assert containers[0]["image"] == "registry.example.com/aiperf/system-controller:0.1.0"
    assert containers[0]["args"] == ["--config", "/config/run_config.json",
                                     "--service-id", "system-controller"]
    ports = {p["name"]: p["containerPort"] for c in containers for p in c["ports"]}
    channels = ("control", "bus-front", "bus-back", "credits", "credit-returns", "records")
    assert {ports[n] for n in channels} == {5667, 5663, 5664, 5564, 5565, 5557}
    assert ports["http-api"] == 9090 and ports["http-results"] == 9091
    assert sorted(v for k, v in ports.items() if k.startswith("health-")) == [*range(8080, 8086), 8089, 8090]
    sidecar = containers[-2]
    assert sidecar["image"] == "registry.example.com/aiperf/results-sidecar:0.1.0"
    assert sidecar["args"] == ["--artifact-dir", "/aiperf/artifacts", "--port", "9091",
                               "--controller-health-port", "8080", "--linger-s", str(typical[0].ttl_seconds),
                               "--wait-for", ".aiperf_server_metrics_done.json"]  # server metrics on by default
    assert sidecar["volumeMounts"] == [{"name": "artifacts", "mountPath": "/aiperf/artifacts", "readOnly": True}]
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health-results"}


    metrics = containers[-1]  # the server-metrics manager, its own image
    assert metrics["image"] == "registry.example.com/aiperf/server-metrics-manager:0.1.0"
    assert metrics["args"] == ["--config", "/config/run_config.json"]
    assert {m["name"] for m in metrics["volumeMounts"]} == {"ipc", "artifacts", "config", "curve"}


def test_no_server_metrics_means_no_server_metrics_container(typical) -> None:
    settings, run_config = typical
    off = msgspec.structs.replace(run_config, benchmark=msgspec.structs.replace(
        run_config.benchmark, server_metrics=msgspec.structs.replace(run_config.benchmark.server_metrics,
                                                                     enabled=False)))
    jobs = {r["name"]: r for r in build_jobset(settings, off)["spec"]["replicatedJobs"]}
    names = [c["name"] for c in jobs["controller"]["template"]["spec"]["template"]["spec"]["containers"]]
    assert names[-1] == "results-sidecar" and "server-metrics-manager" not in names


def test_images_without_registry_and_locally_built() -> None:
    from aiperf.kube import image
    assert image("", ServiceType.WORKER, "1.0") == "aiperf/worker:1.0"
    assert image("localhost", ServiceType.API, "latest") == "localhost/aiperf/api:latest"
    assert image("reg.io/team/", ServiceType.API, "x") == "reg.io/team/aiperf/api:x"
