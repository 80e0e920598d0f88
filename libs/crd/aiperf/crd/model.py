"""The custom resources of operator mode, `AIPerfJob` and `AIPerfSweep`, as typed models.

A CR's `spec.benchmark` is the benchmark model itself (`aiperf.config.Benchmark`, its canonical
snake_case shape); everything beside it is the deployment envelope, camelCase on the wire:
`image`, `resourceMode`, `connectionsPerWorker`, `workersPerPod`, `recordProcessorsPerPod`,
`podTemplate`, `secrets`, `logLevel`, `ttlSecondsAfterFinished`, `timeoutSeconds`, `cancel`;
an AIPerfSweep adds `sweep` and `multiRun`. The status models are what the operator and the
controller write (`status.workers` is the controller's, see `WorkersStatus`).

These Structs are the source of the CRDs (`aiperf.crd.generator` generates them; the YAML is never
edited by hand). Every constraint is either a `Meta` annotation (so it is in the schema) or a
cross-field rule written twice, side by side: in `__post_init__` (Python, the operator's and
CLI's check) and in `cel_rules` (core CEL, the API server's check); the tests evaluate both on
the same documents and require the same verdict. Decode a spec with `decode_spec`.

Secrets never appear in a CR: the endpoint's API key and header values are named by Secret
references (`spec.secrets`), plain environment variables may not carry them either.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from aiperf.config import SECRET_ENV_VARS, Benchmark, PhaseKind
from aiperf.config.sweep import SweepType  # one sweep model: the planner's, shared with config files
from aiperf.kube.names import (  # the API's names: the manifests' too
    API_GROUP,
    API_VERSION,
    JOB_KIND,
    SWEEP_KIND,
)
from aiperf.messages import ServiceType, SystemState

__all__ = [
    "API_GROUP", "API_VERSION", "JOB_KIND", "RESERVED_LABELS", "SWEEP_KIND", "AIPerfJobSpec", "Aggregation",
    "AggregationPhase", "ChildEvent", "ChildRef",
    "AIPerfJobStatus", "AIPerfSweepSpec", "AIPerfSweepStatus", "CelRule", "Condition", "ControllerFailure",
    "EnvVar", "EnvVarSource", "JobPhase", "LocalObjectReference", "MultiRun", "PhaseStatus", "PodTemplate",
    "ResourceMode", "ResourceRequirements", "SecretKeySelector", "SecretRefs", "StartupIssue", "SweepSpec",
    "SweepType", "Toleration", "WorkersStatus", "decode_spec",
]


RESERVED_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component")
"""Labels aiperf sets on every object itself; a CR's pod template may not set them."""


@dataclass(frozen=True)
class CelRule:
    """One `x-kubernetes-validations` entry: `rule` (core CEL, `self` the object it is attached
    to; `oldSelf` makes it a transition rule), the `message` shown when it is false, and the
    `field_path` (relative to `self`, e.g. `.kind`) it is about, when it is about one field."""

    rule: str
    message: str
    field_path: str | None = None

    def to_schema(self) -> dict[str, str]:
        """The `x-kubernetes-validations` entry."""
        out = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        return out


def present(expr: str) -> str:
    """CEL: the optional field `expr` (`self.x`) is given and not null. Portable: `x != null` on a
    non-null number is an error in some CEL evaluators, `type(x) != null_type` never is."""
    return f"(has({expr}) && type({expr}) != null_type)"


_DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DnsSubdomain = Annotated[str, Meta(pattern=_DNS1123_SUBDOMAIN, min_length=1, max_length=253)]
EnvName = Annotated[str, Meta(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", min_length=1, max_length=256)]
SecretKey = Annotated[str, Meta(pattern=r"^[-._a-zA-Z0-9]+$", min_length=1, max_length=253)]
Quantity = Annotated[str, Meta(pattern=r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$",
                               description="a Kubernetes quantity: 500m, 2, 1Gi")]
LabelValue = Annotated[str, Meta(pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", max_length=63)]
_QUALIFIED_NAME = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                   r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
QualifiedName = Annotated[str, Meta(pattern=_QUALIFIED_NAME, min_length=1, max_length=316)]
ImageRef = Annotated[str, Meta(pattern=r"^[^\s]+$", min_length=1, max_length=512,
                               description="an image reference, e.g. registry.example/aiperf/all:0.1.0")]
SweepPath = Annotated[str, Meta(pattern=r"^[a-z_][a-z0-9_]*(\.[A-Za-z0-9_-]+)*$", max_length=256)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
PerPod = Annotated[int, Meta(ge=1, le=256)]


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True,
            forbid_unknown_fields=True):
    """Base of the spec models: immutable, camelCase on the wire, defaults left out when encoded,
    unknown fields an error (the API server prunes them; a typo must not pass silently here)."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = ()


# -- deployment envelope -----------------------------------------------------------------------

class ResourceMode(enum.StrEnum):
    """How container resources are set: `guaranteed` requests = limits (the default of direct
    mode: a busy node cannot squeeze a measurement); `burstable` requests only."""

    BURSTABLE = "burstable"
    GUARANTEED = "guaranteed"


class SecretKeySelector(_Wire, frozen=True, kw_only=True):
    """Key `key` of the Secret `name` in the CR's namespace."""

    name: DnsSubdomain
    key: SecretKey


class LocalObjectReference(_Wire, frozen=True, kw_only=True):
    """An object of the CR's namespace, by name (an image pull Secret)."""

    name: DnsSubdomain


class EnvVarSource(_Wire, frozen=True, kw_only=True):
    """Where an environment variable's value comes from: a Secret key."""

    secret_key_ref: SecretKeySelector


class EnvVar(_Wire, frozen=True, kw_only=True):
    """An environment variable of every container: a plain `value` or `valueFrom` a Secret, exactly
    one. The endpoint's secrets (`AIPERF_API_KEY`, `AIPERF_HEADERS_JSON`) never as a plain value."""

    name: EnvName
    value: str | None = None
    value_from: EnvVarSource | None = None

    cel_rules = (
        CelRule(f"{present('self.value')} != {present('self.valueFrom')}",
                "give exactly one of value and valueFrom", ".value"),
        CelRule(f"!(self.name in {list(SECRET_ENV_VARS)!r}) || !{present('self.value')}",
                "a secret never goes in a CR as a plain value: use valueFrom.secretKeyRef or spec.secrets",
                ".value"),
    )

    def __post_init__(self) -> None:
        if (self.value is None) == (self.value_from is None):
            raise ValueError("value: give exactly one of value and valueFrom")
        if self.name in SECRET_ENV_VARS and self.value is not None:
            raise ValueError("value: a secret never goes in a CR as a plain value: use "
                             "valueFrom.secretKeyRef or spec.secrets")


class Toleration(_Wire, frozen=True, kw_only=True):
    """A pod toleration (Kubernetes' own fields and rules)."""

    key: QualifiedName | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    cel_rules = (
        CelRule(f"!({present('self.operator')} && self.operator == 'Exists') || !{present('self.value')} "
                "|| self.value == ''", "operator Exists takes no value", ".value"),
        CelRule(f"{present('self.key')} || ({present('self.operator')} && self.operator == 'Exists')",
                "a toleration without a key needs operator Exists", ".operator"),
        CelRule(f"!{present('self.tolerationSeconds')} || ({present('self.effect')} && "
                "self.effect == 'NoExecute')", "tolerationSeconds needs effect NoExecute",
                ".tolerationSeconds"),
    )

    def __post_init__(self) -> None:
        if self.operator == "Exists" and self.value:
            raise ValueError("value: operator Exists takes no value")
        if self.key is None and self.operator != "Exists":
            raise ValueError("operator: a toleration without a key needs operator Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("toleration_seconds: needs effect NoExecute")


class ResourceRequirements(_Wire, frozen=True, kw_only=True):
    """Requests and limits of one container (`{"cpu": "500m", "memory": "512Mi"}`)."""

    requests: dict[QualifiedName, Quantity] = {}
    limits: dict[QualifiedName, Quantity] = {}


class PodTemplate(_Wire, frozen=True, kw_only=True):
    """What the CR may set on the pods it runs (a typed subset of a pod spec): scheduling,
    metadata, the ServiceAccount, image pulling, environment, and resources per service type
    (`worker`, `record-processor`, ...; unset: the service catalog's defaults)."""

    node_selector: dict[QualifiedName, LabelValue] = {}
    tolerations: Annotated[list[Toleration], Meta(max_length=64)] = []
    image_pull_secrets: Annotated[list[LocalObjectReference], Meta(max_length=16)] = []
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    annotations: dict[QualifiedName, str] = {}
    labels: dict[QualifiedName, LabelValue] = {}
    service_account_name: DnsSubdomain | None = None
    priority_class_name: DnsSubdomain | None = None
    env: Annotated[list[EnvVar], Meta(max_length=64)] = []
    resources: dict[ServiceType, ResourceRequirements] = {}

    cel_rules = (
        CelRule(f"!has(self.labels) || !self.labels.exists(k, k in {list(RESERVED_LABELS)!r})",
                "labels: app.kubernetes.io/name, instance and component are set by aiperf, leave them out",
                ".labels"),
        CelRule("!has(self.env) || self.env.all(e, self.env.exists_one(f, f.name == e.name))",
                "env: each name once", ".env"),
    )

    def __post_init__(self) -> None:
        if any(key in RESERVED_LABELS for key in self.labels):
            raise ValueError("labels: app.kubernetes.io/name, instance and component are set by aiperf, "
                             "leave them out")
        names = [e.name for e in self.env]
        if len(set(names)) != len(names):
            raise ValueError("env: each name once")


class SecretRefs(_Wire, frozen=True, kw_only=True):
    """Secrets of the endpoint, by reference: the API key (`AIPERF_API_KEY` of the workers), and a
    JSON object of header name -> value (`AIPERF_HEADERS_JSON`; the names are in
    `benchmark.endpoint.header_names`)."""

    api_key: SecretKeySelector | None = None
    headers: SecretKeySelector | None = None


class _WorkloadSpec(_Wire, frozen=True, kw_only=True):
    """Fields of both kinds. `benchmark` is required; everything else is optional."""

    benchmark: Benchmark
    image: ImageRef | None = None
    resource_mode: ResourceMode | None = None
    connections_per_worker: Annotated[int, Meta(ge=1)] | None = None
    workers_per_pod: PerPod | None = None
    record_processors_per_pod: PerPod | None = None
    pod_template: PodTemplate | None = None
    secrets: SecretRefs | None = None
    log_level: Literal["debug", "info", "warning", "error"] | None = None
    ttl_seconds_after_finished: NonNegativeInt | None = None
    timeout_seconds: Annotated[int, Meta(ge=1)] | None = None
    cancel: bool = False


class AIPerfJobSpec(_WorkloadSpec, frozen=True, kw_only=True):
    """One benchmark run. After creation only `cancel` and `timeoutSeconds` may change."""

    MUTABLE: ClassVar[frozenset[str]] = frozenset({"cancel", "timeoutSeconds"})


SweepValues = Annotated[list[int | float], Meta(min_length=1, max_length=64)]


class SweepSpec(_Wire, frozen=True, kw_only=True):
    """The variations of a sweep: `parameters` maps a dotted path into the benchmark
    (`phases.profiling.concurrency`) to the values it takes; `cooldownSeconds` pause between
    variations. For `zip` every list has the same length."""

    type: SweepType = SweepType.GRID
    parameters: Annotated[dict[SweepPath, SweepValues], Meta(min_length=1, max_length=8)]
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0

    cel_rules = (
        CelRule("!has(self.type) || self.type != 'zip' || self.parameters.all(a, "
                "self.parameters.all(b, size(self.parameters[a]) == size(self.parameters[b])))",
                "parameters: a zip sweep needs the same number of values for every parameter",
                ".parameters"),
    )

    def __post_init__(self) -> None:
        if self.type is SweepType.ZIP and len({len(v) for v in self.parameters.values()}) > 1:
            raise ValueError("parameters: a zip sweep needs the same number of values for every parameter")


class MultiRun(_Wire, frozen=True, kw_only=True):
    """Repeat every variation `numRuns` times (trials), `cooldownSeconds` apart. `minRuns`: a
    variation with fewer successful trials than this fails the sweep (its aggregate is still
    written); at most `numRuns`."""

    num_runs: Annotated[int, Meta(ge=1, le=100)] = 1
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0
    min_runs: Annotated[int, Meta(ge=1, le=100)] = 1

    cel_rules = (
        CelRule("(has(self.minRuns) ? self.minRuns : 1) <= (has(self.numRuns) ? self.numRuns : 1)",
                "minRuns: at most numRuns", ".minRuns"),
    )

    def __post_init__(self) -> None:
        if self.min_runs > self.num_runs:
            raise ValueError("min_runs: at most num_runs")


class AIPerfSweepSpec(_WorkloadSpec, frozen=True, kw_only=True):
    """A sweep: child AIPerfJobs, one per variation of `benchmark` (and trial). After creation
    only `cancel` and `ttlSecondsAfterFinished` may change."""

    sweep: SweepSpec
    multi_run: MultiRun | None = None

    MUTABLE: ClassVar[frozenset[str]] = frozenset({"cancel", "ttlSecondsAfterFinished"})


# -- status ------------------------------------------------------------------------------------

class _Status(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """Base of the status models: unknown fields are kept out by the API server's pruning, and an
    older reader skips newer fields (no `forbid_unknown_fields`)."""


class JobPhase(enum.StrEnum):
    """`status.phase`, the operator's view of a run."""

    PENDING = "Pending"
    INITIALIZING = "Initializing"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class Condition(_Status, frozen=True, kw_only=True):
    """A Kubernetes condition (`WorkersReady`, `Cancelling`, ...), one per type."""

    type: Annotated[str, Meta(min_length=1, max_length=316)]
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: Annotated[str, Meta(extra_json_schema={"format": "date-time"})] | None = None
    observed_generation: NonNegativeInt | None = None


class PhaseStatus(_Status, frozen=True, kw_only=True):
    """Progress of one benchmark phase (`status.phases.<name>`, written by the controller).
    `phaseKind` decides lifecycle behaviour, never the name."""

    phase_name: str
    phase_kind: PhaseKind
    phase_index: NonNegativeInt
    profiling_index: NonNegativeInt | None = None
    requests_sent: NonNegativeInt | None = None
    requests_completed: NonNegativeInt | None = None
    requests_failed: NonNegativeInt | None = None
    requests_cancelled: NonNegativeInt | None = None
    requests_total: NonNegativeInt | None = None
    requests_per_second: Annotated[float, Meta(ge=0)] | None = None
    start_time: str | None = None
    end_time: str | None = None


class WorkersStatus(_Status, frozen=True, kw_only=True):
    """`status.workers`: the controller's aggregate (the operator writes only `ready` and `total`,
    and only before the controller's first push: `totalPods` marks the takeover). Exactly these
    nine keys; anything else is pruned."""

    ready: NonNegativeInt | None = None
    total: NonNegativeInt | None = None
    dispatchable: NonNegativeInt | None = None
    router_connected: NonNegativeInt | None = None
    ready_record_processors: NonNegativeInt | None = None
    declared_record_processors: NonNegativeInt | None = None
    ready_pods: NonNegativeInt | None = None
    total_pods: NonNegativeInt | None = None
    degraded_pods: NonNegativeInt | None = None


class StartupIssue(_Status, frozen=True, kw_only=True):
    """The highest-priority reason the run's pods do not start (image pull, scheduling, crash
    loop, ...), with the fingerprint and first sighting that make its grace period survive an
    operator restart. `critical` ones fail the run once they persist."""

    reason: str
    message: str | None = None
    pod: str | None = None
    container: str | None = None
    fingerprint: str | None = None
    first_observed_time: str | None = None
    critical: bool | None = None


class ControllerFailure(_Status, frozen=True, kw_only=True):
    """A service error the controller pushed before exiting: the run is Failed, never salvaged."""

    message: str
    service: str | None = None
    reason: str | None = None
    time: str | None = None


class AIPerfJobStatus(_Status, frozen=True, kw_only=True):
    """`status` of an AIPerfJob. The operator owns `phase`, `conditions`, `observedGeneration`,
    `startupIssue`, `runEpoch`, `resultsPath`, `startTime` and `completionTime`; the run's
    controller pushes `subPhase`, `currentPhase`, `phases`, `workers` (after its first push), the
    profiling phase's counters projected to the top level (`requestsCompleted`, `requestsTotal`,
    `requestsPerSecond`, `progressPercent`), `controllerFailure`, `resultsExported` and
    `serverMetrics` (the bounded projection of the server-metrics export,
    `aiperf.servermetrics.projection`: a snapshot, replaced whole on every push)."""

    phase: JobPhase | None = None
    sub_phase: SystemState | None = None
    current_phase: str | None = None
    phases: dict[str, PhaseStatus] = {}
    workers: WorkersStatus | None = None
    requests_completed: NonNegativeInt | None = None
    requests_total: NonNegativeInt | None = None
    requests_per_second: Annotated[float, Meta(ge=0)] | None = None
    progress_percent: Annotated[float, Meta(ge=0, le=100)] | None = None
    conditions: list[Condition] = []
    observed_generation: NonNegativeInt | None = None
    startup_issue: StartupIssue | None = None
    results_path: str | None = None
    run_epoch: Annotated[str, Meta(pattern=r"^[0-9]+$")] | None = None
    controller_failure: ControllerFailure | None = None
    results_exported: bool | None = None
    start_time: str | None = None
    completion_time: str | None = None
    server_metrics: dict[str, Any] | None = None


class ChildRef(_Status, frozen=True, kw_only=True):
    """A child AIPerfJob of a sweep: its name and UID, which variation and trial it runs."""

    name: str
    uid: str | None = None
    variation: NonNegativeInt | None = None
    trial: NonNegativeInt | None = None


class ChildEvent(_Status, frozen=True, kw_only=True):
    """The latest phase change of a child seen by the operator."""

    child: str
    phase: JobPhase
    time: str | None = None


class AggregationPhase(enum.StrEnum):
    """`status.aggregation.phase`, written by the sweep-controller."""

    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"


class Aggregation(_Status, frozen=True, kw_only=True):
    """The sweep-controller's progress on the sweep aggregate: `Complete` once it is in its
    results sidecar, ready for the operator to harvest; `failedVariations` below `minRuns`;
    `planDigest` the digest of the plan it runs (a restarted one must plan the same)."""

    phase: AggregationPhase
    message: str | None = None
    plan_digest: Annotated[str, Meta(pattern=r"^[0-9a-f]{16}$")] | None = None
    files: list[str] = []
    failed_variations: list[str] = []


class AIPerfSweepStatus(_Status, frozen=True, kw_only=True):
    """`status` of an AIPerfSweep: its phase, and the roll-up of its child AIPerfJobs. The
    operator owns everything but `aggregation` (the sweep-controller's)."""

    phase: JobPhase | None = None
    conditions: list[Condition] = []
    observed_generation: NonNegativeInt | None = None
    run_epoch: Annotated[str, Meta(pattern=r"^[0-9]+$")] | None = None
    total_variations: NonNegativeInt | None = None
    total_runs: NonNegativeInt | None = None
    completed_runs: NonNegativeInt | None = None
    failed_runs: NonNegativeInt | None = None
    progress_percent: Annotated[float, Meta(ge=0, le=100)] | None = None
    current_child: str | None = None
    current_child_ref: ChildRef | None = None
    last_child_event: ChildEvent | None = None
    run_states: dict[str, JobPhase] = {}
    aggregation: Aggregation | None = None
    startup_issue: StartupIssue | None = None
    controller_failure: ControllerFailure | None = None
    results_path: str | None = None
    results_available: bool | None = None
    start_time: str | None = None
    completion_time: str | None = None


def decode_spec(spec: Any, kind: str) -> AIPerfJobSpec | AIPerfSweepSpec:
    """The typed spec of a CR of `kind` (`AIPerfJob` or `AIPerfSweep`) from its `spec` mapping;
    raises `msgspec.ValidationError` naming the field (`aiperf.config.loader.describe_error`
    turns it into words)."""
    model: type[AIPerfJobSpec | AIPerfSweepSpec] = AIPerfJobSpec if kind == JOB_KIND else AIPerfSweepSpec
    return msgspec.convert(spec, model)
