"""One container per service instance: image, flags, ports, environment, resources, mounts.

Each image's entrypoint is its pex, unpacked into a venv at build time (`/app/venv/pex`), so
a container sets `args` only:
`--config /config/run_config.json --service-id ID [--group-id G]`. Worker pods of the `workers`
job derive their group from the JobSet job index: `AIPERF_JOB_INDEX` is read from the pod
annotation `jobset.sigs.k8s.io/job-index` (downward API) and Kubernetes expands
`$(AIPERF_JOB_INDEX)` inside `args`, so no shell is needed.

Ports: health ports 8080-8088, one per service type (the service catalog,
`aiperf.config.catalog`); the i-th instance of a scaled type in a pod adds 100 x i
(worker-3: 8387), so ports stay unique within a pod. Each container learns its
health port from `AIPERF_HEALTH_PORT`. Channel ports (control 5667, event bus 5663/5664, credits
5564/5565, records 5557, pods 5566: per-pod issuing) and the API's 9090 are declared on the
container that binds them. With per-pod issuing a worker pod's workers reach its
worker-group-manager over the pod's shared IPC folder, never a port.
Port names are at most 15 characters (a Kubernetes rule), hence `health-ctrl`, `health-w3`.

The controller pod also runs two auxiliary services of the catalog (`aiperf.config.catalog.
AUXILIARY`: their own images, ports and resources). `results_container`, the results sidecar
(`aiperf.results_sidecar.main`), serves the finished exports from the artifacts volume
(read-only) on port 9091 after the control plane has exited, until `POST /shutdown` (`aiperf
kube shutdown`, the operator once it has copied them) or a linger time. When the run scrapes
server metrics (on by default), `server_metrics_container`, the server-metrics manager
(`aiperf.server_metrics_manager.main`), scrapes the inference server in-cluster around each
phase, writes `server_metrics_export.json/.csv` into the artifacts volume and keeps the live
status projection there for the control plane's status push.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from aiperf.comms import Channel
from aiperf.config.catalog import (
    API_PORT_NAME,
    RESULTS_SIDECAR,
    SERVER_METRICS_MANAGER,
    AuxiliarySpec,
    spec_of,
)
from aiperf.config.markers import SERVER_METRICS_DONE_MARKER
from aiperf.kube.config_map import ARTIFACT_DIR, CONFIG_DIR, CONFIG_PATH, CURVE_DIR, IPC_DIR
from aiperf.kube.names import image
from aiperf.kube.settings import KubeSettings
from aiperf.messages import ServiceType
from aiperf.runtime.health import HEALTH_PORT_ENV

API_PORT = 9090
CONTROL_PLANE_CONTAINER = "control-plane"
"""The system-controller's container in the controller pod (its service id stays `system-controller`)."""
RESULTS_CONTAINER = RESULTS_SIDECAR.name
((RESULTS_PORT_NAME, RESULTS_PORT),) = RESULTS_SIDECAR.ports
SERVER_METRICS_CONTAINER = SERVER_METRICS_MANAGER.name
JOB_INDEX_ENV = "AIPERF_JOB_INDEX"
CONTROLLER_HOST_ENV = "AIPERF_CONTROLLER_HOST"
JOB_INDEX_ANNOTATION = "jobset.sigs.k8s.io/job-index"
JOB_INDEX_ARG = f"$({JOB_INDEX_ENV})"
"""Expanded by Kubernetes in `args` from the container's `AIPERF_JOB_INDEX`."""

IPC_VOLUME, ARTIFACTS_VOLUME, CONFIG_VOLUME, CURVE_VOLUME = "ipc", "artifacts", "config", "curve"
INSTANCE_PORT_STRIDE = 100

BOUND_PORTS: dict[str, tuple[str, int]] = {
    Channel.CONTROL.label: ("control", Channel.CONTROL.default_port),
    Channel.EVENT_BUS_FRONTEND.label: ("bus-front", Channel.EVENT_BUS_FRONTEND.default_port),
    Channel.EVENT_BUS_BACKEND.label: ("bus-back", Channel.EVENT_BUS_BACKEND.default_port),
    Channel.CREDITS.label: ("credits", Channel.CREDITS.default_port),
    Channel.CREDIT_RETURNS.label: ("credit-returns", Channel.CREDIT_RETURNS.default_port),
    Channel.RECORDS.label: ("records", Channel.RECORDS.default_port),
    Channel.PODS.label: ("pods", Channel.PODS.default_port),
    API_PORT_NAME: (API_PORT_NAME, API_PORT),
}
"""Port name (at most 15 characters) and number of everything a service `binds` (catalog)."""

_MOUNTS = (
    {"name": IPC_VOLUME, "mountPath": IPC_DIR},
    {"name": ARTIFACTS_VOLUME, "mountPath": ARTIFACT_DIR},
    {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True},
    {"name": CURVE_VOLUME, "mountPath": CURVE_DIR, "readOnly": True},
)


def health_port(service_type: ServiceType, instance: int | None = None) -> tuple[str, int]:
    """Name and number of the health port of `service_type` (instance `instance` if scaled)."""
    name, port = spec_of(service_type).health_port
    if instance is None:
        return name, port
    return f"{name}{instance}", port + INSTANCE_PORT_STRIDE * instance


STARTUP_BUDGET_S = 180
"""How long a container may take to serve its health port: pulls, pex unpacking and imports
(the same budget pods get to register)."""


def probes(health_port_name: str) -> dict[str, Any]:
    """Startup, liveness and readiness probes on the container's health port (`aiperf.runtime.
    health`): started within `STARTUP_BUDGET_S`, restarted when its loop stops answering for
    30 s, ready while registered and running."""
    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": health_port_name}, "timeoutSeconds": 5}

    return {"startupProbe": {**get("/healthz"), "periodSeconds": 2, "failureThreshold": STARTUP_BUDGET_S // 2},
            "livenessProbe": {**get("/healthz"), "periodSeconds": 10, "failureThreshold": 3},
            "readinessProbe": {**get("/readyz"), "periodSeconds": 5, "failureThreshold": 2}}


def job_index_env() -> dict[str, Any]:
    """`AIPERF_JOB_INDEX` from the pod's JobSet job-index annotation (downward API)."""
    path = f"metadata.annotations['{JOB_INDEX_ANNOTATION}']"
    return {"name": JOB_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def container(settings: KubeSettings, *, name: str, service_type: ServiceType, service_id: str,
              group_id: str | None = None, instance: int | None = None,
              pod_env: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The container `name` running one `service_type` instance `service_id`.

    `pod_env` comes first in `env` (pod-specific values), then the endpoint secrets (worker
    containers only), the user's `env_vars`, then the user's `env_from_secrets`."""
    args = ["--config", CONFIG_PATH, "--service-id", service_id]
    if group_id is not None:
        args += ["--group-id", group_id]
    health_name, health_number = health_port(service_type, instance)
    ports = [(health_name, health_number), *(BOUND_PORTS[bound] for bound in spec_of(service_type).binds)]
    env: list[dict[str, Any]] = [{"name": HEALTH_PORT_ENV, "value": str(health_number)},
                                 *copy.deepcopy(list(pod_env))]
    if service_type is ServiceType.WORKER:
        env += [ref.to_env(var) for var, ref in settings.endpoint_secret_env().items()]
    env += [{"name": var, "value": value} for var, value in settings.env_vars.items()]
    env += [ref.to_env(var) for var, ref in settings.plain_secret_env().items()]
    return {
        "name": name,
        "image": settings.image or image(settings.image_registry, service_type, settings.image_tag),
        "imagePullPolicy": settings.image_pull_policy,
        "args": args,
        "env": env,
        "ports": [{"name": port_name, "containerPort": number, "protocol": "TCP"}
                  for port_name, number in ports],
        "resources": settings.resources_for(service_type).to_manifest(),
        **probes(health_name),
        "volumeMounts": [dict(mount) for mount in _MOUNTS],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def auxiliary_container(settings: KubeSettings, spec: AuxiliarySpec, *, args: list[str],
                        env: Sequence[dict[str, Any]] = (), mounts: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The container of the auxiliary service `spec` (its image, health port and probes, ports,
    resources), started with `args`, with `env` after its `AIPERF_HEALTH_PORT`."""
    assert spec.health_port is not None
    health_name, health_number = spec.health_port
    return {
        "name": spec.name,
        "image": settings.image or image(settings.image_registry, spec.name, settings.image_tag),
        "imagePullPolicy": settings.image_pull_policy,
        "args": args,
        "env": [{"name": HEALTH_PORT_ENV, "value": str(health_number)}, *env],
        "ports": [{"name": name, "containerPort": number, "protocol": "TCP"}
                  for name, number in (spec.health_port, *spec.ports)],
        "resources": {"limits": dict(spec.limits), "requests": dict(spec.requests)},
        **probes(health_name),
        "volumeMounts": [dict(mount) for mount in mounts],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def results_container(settings: KubeSettings, *, server_metrics: bool = False) -> dict[str, Any]:
    """The controller pod's results sidecar (see the module doc): serves the exports of
    `ARTIFACT_DIR` on `RESULTS_PORT` once the run has ended (the control plane's end marker, or
    its health port gone) and, with `server_metrics`, the server-metrics manager has written its
    exports (`SERVER_METRICS_DONE_MARKER`, waited for at most a minute), and exits 0 on
    `POST /shutdown` or `settings.ttl_seconds` after the run's end (the JobSet's own TTL counts
    from then)."""
    control_health = spec_of(ServiceType.SYSTEM_CONTROLLER).health_port[1]
    args = ["--artifact-dir", ARTIFACT_DIR, "--port", str(RESULTS_PORT), "--controller-health-port",
            str(control_health), "--linger-s", str(settings.ttl_seconds),
            *(["--wait-for", SERVER_METRICS_DONE_MARKER] if server_metrics else [])]
    return auxiliary_container(settings, RESULTS_SIDECAR, args=args,
                               mounts=[{"name": ARTIFACTS_VOLUME, "mountPath": ARTIFACT_DIR, "readOnly": True}])


def server_metrics_container(settings: KubeSettings) -> dict[str, Any]:
    """The controller pod's server-metrics manager (see the module doc): it reaches the event bus
    over the pod's IPC volume like the other controller containers, and exits 0 once the control
    plane's run-ended marker is in the artifacts volume."""
    env = [*({"name": var, "value": value} for var, value in settings.env_vars.items()),
           *(ref.to_env(var) for var, ref in settings.plain_secret_env().items())]
    return auxiliary_container(settings, SERVER_METRICS_MANAGER, args=["--config", CONFIG_PATH], env=env,
                               mounts=_MOUNTS)
