"""The JobSet `aiperf-<name>`: one controller pod and the worker pods.

Replicated jobs (each job runs one pod):
- `controller` (1): `control-plane` (the system-controller), event-bus-proxy, dataset-manager,
  timing-manager, records-manager and api as sibling containers sharing localhost and the `ipc`
  and `artifacts` emptyDirs, plus `results-sidecar`, which keeps serving the exports after the
  others have exited (`aiperf.kube.containers.results_container`), and `server-metrics-manager`
  when the run scrapes server metrics or configured GPU telemetry endpoints
  (`aiperf.kube.containers.server_metrics_container`). The services talk over IPC
  among themselves and also bind TCP on 0.0.0.0 (from the ConfigMap's comms) for the worker pods.
- `workers` (one job per full pod): worker-group-manager, `worker-0..k-1`,
  `record-processor-0..m-1`. Group `g<i>` is the pod's JobSet job index.
- `workers-last` (1, only for an uneven split): the last group `g<pods-1>` with fewer workers.
  A replicated job has one pod template, so a short last pod needs a template of its own; its
  group id is written out literally.

Worker pods find the controller at `aiperf-<name>-controller-0-0.aiperf-<name>`
(`AIPERF_CONTROLLER_HOST`), the JobSet headless service enabled by `network`. The run is over
when the controller job completes (success policy), i.e. once the results container has exited
too (shut down, or its linger time after the run's end); any failed job fails the JobSet (no
restarts: a benchmark is not retried behind the user's back). Pods never restart
(`restartPolicy: Never`, `backoffLimit: 0`): a restarted worker would re-register in the middle
of a run under the same id, so a crash must surface as a failure instead.

The user's pod fields (`KubeSettings.pod`, an AIPerfJob's `podTemplate`) go into every pod:
volumes and their mounts in every container, scheduling, security contexts (merged over aiperf's
own), init containers. With `keep_failed_pods` the JobSet has no TTL: its pods stay until the
run is deleted.
"""

from __future__ import annotations

import copy
from typing import Any

from aiperf.config import RunConfig
from aiperf.config.catalog import Placement, Scale, in_pod
from aiperf.config.user_files import NAMESPACE_ENV
from aiperf.kube.config_map import require_secrets
from aiperf.kube.containers import (
    ARTIFACTS_VOLUME,
    CONFIG_VOLUME,
    CONTROL_PLANE_CONTAINER,
    CONTROLLER_HOST_ENV,
    IPC_VOLUME,
    JOB_INDEX_ARG,
    container,
    job_index_env,
    results_container,
    server_metrics_container,
)
from aiperf.kube.curve_secret import curve_volume
from aiperf.kube.metadata import labels, object_meta
from aiperf.kube.names import (
    CONTROLLER_JOB,
    WORKERS_JOB,
    WORKERS_LAST_JOB,
    config_map_name,
    controller_host,
    jobset_name,
)
from aiperf.kube.settings import KubeSettings
from aiperf.messages import ServiceType

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"

CONTROLLER_SERVICES = tuple(spec.type for spec in in_pod(Placement.CONTROLLER_POD))
"""Containers of the controller pod (the catalog's, in start order); each singleton's id is its
type name."""


_POD_FIELDS = (("affinity", "affinity"), ("topology_spread_constraints", "topologySpreadConstraints"),
               ("priority_class_name", "priorityClassName"), ("runtime_class_name", "runtimeClassName"),
               ("scheduler_name", "schedulerName"), ("host_aliases", "hostAliases"), ("dns_policy", "dnsPolicy"),
               ("dns_config", "dnsConfig"), ("termination_grace_period_seconds", "terminationGracePeriodSeconds"),
               ("share_process_namespace", "shareProcessNamespace"), ("init_containers", "initContainers"))


RUN_AS_USER = 65532
RESTRICTED_POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER,
    "seccompProfile": {"type": "RuntimeDefault"}}
"""The pod security context of every run pod: with each container's `allowPrivilegeEscalation:
false` and `capabilities.drop: [ALL]`, what the `restricted` Pod Security level demands (a
namespace enforcing it refuses anything less). `podTemplate.securityContext` may override it."""


def _pod_spec(settings: KubeSettings, containers: list[dict[str, Any]]) -> dict[str, Any]:
    extra = settings.pod
    for item in containers:
        item["volumeMounts"] = [*item["volumeMounts"], *copy.deepcopy(extra.volume_mounts)]
        item["securityContext"] = {**item["securityContext"], **copy.deepcopy(extra.container_security_context)}
    spec: dict[str, Any] = {
        **copy.deepcopy(extra.extra_pod_spec),
        "restartPolicy": "Never",
        "serviceAccountName": settings.service_account_name,
        "enableServiceLinks": False,
        "securityContext": {**RESTRICTED_POD_SECURITY, **copy.deepcopy(extra.pod_security_context)},
        "containers": containers,
        "volumes": [
            {"name": IPC_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
            {"name": ARTIFACTS_VOLUME, "emptyDir": {}},
            {"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(settings.name)}},
            curve_volume(settings),
            *copy.deepcopy(extra.volumes),
        ],
    }
    if settings.node_selector:
        spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        spec["tolerations"] = [dict(t) for t in settings.tolerations]
    if settings.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
    for field, key in _POD_FIELDS:
        value = getattr(extra, field)
        if value not in (None, False, [], {}):
            spec[key] = copy.deepcopy(value)
    return spec


def _replicated_job(settings: KubeSettings, *, job: str, replicas: int, component: str,
                    containers: list[dict[str, Any]]) -> dict[str, Any]:
    pod_meta: dict[str, Any] = {"labels": labels(settings, component)}
    if settings.annotations:
        pod_meta["annotations"] = dict(settings.annotations)
    return {
        "name": job,
        "replicas": replicas,
        "template": {
            "metadata": {"labels": labels(settings, component)},
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "completionMode": "Indexed",
                "template": {"metadata": pod_meta, "spec": _pod_spec(settings, containers)},
            },
        },
    }


NAMESPACE_FIELD_ENV = {"name": NAMESPACE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
"""`AIPERF_NAMESPACE`: the pod's namespace (downward API)."""


def controller_containers(settings: KubeSettings, *, server_metrics: bool = False) -> list[dict[str, Any]]:
    """The controller pod's containers: one per `CONTROLLER_SERVICES` entry (the
    system-controller's named `control-plane`), then the results container, then (when the run
    scrapes server metrics) the `server-metrics-manager` container."""
    return [*(container(settings, name=CONTROL_PLANE_CONTAINER if t is ServiceType.SYSTEM_CONTROLLER else str(t),
                        service_type=t, service_id=str(t),
                        # the namespace a user file's templates read (`artifacts.user_files`)
                        pod_env=[NAMESPACE_FIELD_ENV] if t is ServiceType.SYSTEM_CONTROLLER else ())
              for t in CONTROLLER_SERVICES),
            results_container(settings, server_metrics=server_metrics),
            *([server_metrics_container(settings)] if server_metrics else [])]


def worker_containers(settings: KubeSettings, *, group: str, workers: int,
                      pod_env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A worker pod's containers for group id `group` (`g3`, or `g$(AIPERF_JOB_INDEX)`):
    worker-group-manager, `record-processor-0..m-1`, `worker-0..workers-1` (catalog order).

    Ids match the system-controller's plan: `worker-group-manager-<g>`, `worker-<g>-<i>`,
    `record-processor-<g>-<j>`."""
    out = []
    for spec in in_pod(Placement.WORKER_POD):
        if spec.scale is Scale.PER_GROUP:
            out.append(container(settings, name=str(spec.type), service_type=spec.type,
                                 service_id=f"{spec.type}-{group}", group_id=group, pod_env=pod_env))
            continue
        count = workers if spec.scale is Scale.WORKERS else settings.record_processors_per_group
        out += [container(settings, name=f"{spec.type}-{i}", service_type=spec.type,
                          service_id=f"{spec.type}-{group}-{i}", group_id=group, instance=i, pod_env=pod_env)
                for i in range(count)]
    return out


def build_jobset(settings: KubeSettings, run_config: RunConfig) -> dict[str, Any]:
    """The JobSet of the run (see the module doc); raises `KubeConfigError` when the run needs a
    secret no Secret reference supplies."""
    require_secrets(settings, run_config)
    layout = settings.layout
    host = {"name": CONTROLLER_HOST_ENV, "value": controller_host(settings.name)}
    gpu = run_config.benchmark.gpu_telemetry
    jobs = [
        _replicated_job(settings, job=CONTROLLER_JOB, replicas=1, component=CONTROLLER_JOB,
                        containers=controller_containers(  # the same container scrapes GPU telemetry
                            settings, server_metrics=run_config.benchmark.server_metrics.enabled
                            or (gpu.enabled and bool(gpu.urls)))),
        _replicated_job(settings, job=WORKERS_JOB, replicas=layout.full_pods, component=WORKERS_JOB,
                        containers=worker_containers(settings, group=f"g{JOB_INDEX_ARG}",
                                                     workers=layout.workers_per_pod,
                                                     pod_env=[job_index_env(), host])),
    ]
    if layout.last_pod_workers is not None:
        jobs.append(_replicated_job(
            settings, job=WORKERS_LAST_JOB, replicas=1, component=WORKERS_JOB,
            containers=worker_containers(settings, group=f"g{layout.pods - 1}",
                                         workers=layout.last_pod_workers, pod_env=[host])))
    name = jobset_name(settings.name)
    spec: dict[str, Any] = {} if settings.keep_failed_pods else {"ttlSecondsAfterFinished": settings.ttl_seconds}
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": object_meta(settings, name),
        "spec": {
            **spec,
            "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [CONTROLLER_JOB]},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": jobs,
        },
    }
