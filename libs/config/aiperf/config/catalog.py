"""The service catalog: every service type of a run and everything that varies with it, in one
table. The system-controller's start plan, the expected registrations, the Kubernetes pods
(containers, ports, default resources) and the local launcher all read it; docs/extending.md
says what else adding a service takes.

`AUXILIARY` lists our other processes, each its own service folder and image, that register
with nobody: the controller pod's results sidecar and server-metrics manager, the operator
pod's results server, an AIPerfSweep's sweep-controller.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from aiperf.messages import ServiceType


class Placement(enum.StrEnum):
    """Where a service runs in Kubernetes: the one controller pod or every worker pod of a run,
    the operator's pod, or the pod of an AIPerfSweep."""

    CONTROLLER_POD = "controller"
    WORKER_POD = "worker"
    OPERATOR_POD = "operator"
    SWEEP_POD = "sweep"


class Scale(enum.StrEnum):
    """How many instances a run has: one; one per worker group; `workers_in(group)` per group;
    `record_processors_per_group` per group."""

    ONE = "one"
    PER_GROUP = "per_group"
    WORKERS = "workers"
    RECORD_PROCESSORS = "record_processors"


@dataclass(frozen=True, kw_only=True)
class ServiceSpec:
    """One service type. `binds` are the channels (by label) and named TCP ports it listens on
    for other pods; `health_port` is its health port (name, number; scaled types add 100 per
    instance); `cpu`/`memory` its default Kubernetes requests (= limits)."""

    type: ServiceType
    placement: Placement
    scale: Scale
    health_port: tuple[str, int]
    cpu: str
    memory: str
    binds: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The service's entry module (`aiperf.timing_manager.main`)."""
        return f"aiperf.{self.type.value.replace('-', '_')}.main"


API_PORT_NAME = "http-api"

CATALOG: tuple[ServiceSpec, ...] = (
    ServiceSpec(type=ServiceType.SYSTEM_CONTROLLER, placement=Placement.CONTROLLER_POD, scale=Scale.ONE,
                health_port=("health-ctrl", 8080), cpu="100m", memory="256Mi", binds=("control",)),
    ServiceSpec(type=ServiceType.EVENT_BUS_PROXY, placement=Placement.CONTROLLER_POD, scale=Scale.ONE,
                health_port=("health-bus", 8081), cpu="250m", memory="256Mi",
                binds=("event_bus_frontend", "event_bus_backend")),
    ServiceSpec(type=ServiceType.RECORDS_MANAGER, placement=Placement.CONTROLLER_POD, scale=Scale.ONE,
                health_port=("health-records", 8084), cpu="500m", memory="1Gi", binds=("records",)),
    ServiceSpec(type=ServiceType.TIMING_MANAGER, placement=Placement.CONTROLLER_POD, scale=Scale.ONE,
                health_port=("health-timing", 8083), cpu="500m", memory="256Mi",
                binds=("credits", "credit_returns", "pods")),
    ServiceSpec(type=ServiceType.DATASET_MANAGER, placement=Placement.CONTROLLER_POD, scale=Scale.ONE,
                health_port=("health-dataset", 8082), cpu="250m", memory="1Gi"),
    ServiceSpec(type=ServiceType.API, placement=Placement.CONTROLLER_POD, scale=Scale.ONE,
                health_port=("health-api", 8085), cpu="100m", memory="256Mi", binds=(API_PORT_NAME,)),
    ServiceSpec(type=ServiceType.WORKER_GROUP_MANAGER, placement=Placement.WORKER_POD, scale=Scale.PER_GROUP,
                health_port=("health-wgm", 8086), cpu="100m", memory="128Mi"),
    ServiceSpec(type=ServiceType.RECORD_PROCESSOR, placement=Placement.WORKER_POD,
                scale=Scale.RECORD_PROCESSORS, health_port=("health-rp", 8088), cpu="250m", memory="512Mi"),
    ServiceSpec(type=ServiceType.WORKER, placement=Placement.WORKER_POD, scale=Scale.WORKERS,
                health_port=("health-w", 8087), cpu="500m", memory="512Mi"),
)
"""Every service type, in start order: the controller first (it binds the control channel),
then the event bus (so no early event is lost), then consumers before producers."""

SPECS: dict[ServiceType, ServiceSpec] = {spec.type: spec for spec in CATALOG}


@dataclass(frozen=True, kw_only=True)
class AuxiliarySpec:
    """One of our processes that registers with nobody: `name` is its folder under `services/`,
    its image `aiperf/<name>` and its container; `placement` where it runs; `health_port` its
    health port (name, number; None: its HTTP port answers the probes); `ports` what it serves;
    `requests`/`limits` its default Kubernetes resources."""

    name: str
    placement: Placement
    health_port: tuple[str, int] | None = None
    ports: tuple[tuple[str, int], ...] = ()
    requests: tuple[tuple[str, str], ...] = ()
    limits: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        """Its entry module (`aiperf.results_sidecar.main`)."""
        return f"aiperf.{self.name.replace('-', '_')}.main"


RESULTS_SIDECAR = AuxiliarySpec(
    name="results-sidecar", placement=Placement.CONTROLLER_POD, health_port=("health-results", 8089),
    ports=(("http-results", 9091),), requests=(("cpu", "50m"), ("memory", "128Mi")),
    limits=(("cpu", "50m"), ("memory", "128Mi")))
"""Serves a run's exports after its control plane exited, until `POST /shutdown` or a linger time."""
SERVER_METRICS_MANAGER = AuxiliarySpec(
    name="server-metrics-manager", placement=Placement.CONTROLLER_POD, health_port=("health-smm", 8090),
    requests=(("cpu", "100m"), ("memory", "256Mi")), limits=(("cpu", "100m"), ("memory", "256Mi")))
"""Scrapes the inference server's metrics in-cluster around each phase (when the run asks)."""
RESULTS_SERVER = AuxiliarySpec(name="results-server", placement=Placement.OPERATOR_POD,
                               ports=(("http-results", 8081),))
"""Stored runs over HTTP (API and dashboard); its resources come from the operator's chart."""
SWEEP_CONTROLLER = AuxiliarySpec(name="sweep-controller", placement=Placement.SWEEP_POD,
                                 requests=(("cpu", "50m"), ("memory", "128Mi")), limits=(("memory", "256Mi"),))
"""Runs an AIPerfSweep's child AIPerfJobs, then writes the sweep's aggregate."""

AUXILIARY: tuple[AuxiliarySpec, ...] = (RESULTS_SIDECAR, SERVER_METRICS_MANAGER, RESULTS_SERVER, SWEEP_CONTROLLER)
"""Every auxiliary service (see the module doc)."""


def spec_of(service_type: ServiceType) -> ServiceSpec:
    """The catalog entry of `service_type`."""
    return SPECS[ServiceType(service_type)]


def in_pod(placement: Placement) -> tuple[ServiceSpec, ...]:
    """The catalog entries placed in `placement`'s pods, in start order."""
    return tuple(spec for spec in CATALOG if spec.placement is placement)
