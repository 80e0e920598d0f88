"""The custom resources of operator mode, `AIPerfJob` and `AIPerfSweep`, as typed models, in
AIPerf 0.13's shape: its CRs and ours are read alike (`tests/compat` checks it against AIPerf).

A CR's `spec.benchmark` is AIPerf's config v2 `benchmark:` body as written (camelCase or
snake_case, shorthands, Jinja2 over `spec.variables`), read with the config reader into
`aiperf.config.Benchmark` when the spec is decoded; everything beside it is AIPerf's deployment
envelope, camelCase (`_WorkloadEnvelope`); an AIPerfSweep adds `sweep`, `multiRun`,
`childMetadata`. The status models are what the operator and the controller write
(`status.workers` is the controller's, see `WorkersStatus`).

The wire Structs (`JobSpecSchema`, `SweepSpecSchema`, status) are the source of the CRDs
(`aiperf.crd.generator` generates them; the YAML is never edited by hand). Every envelope constraint
is either a `Meta` annotation (so it is in the schema) or a cross-field rule written twice, side by
side: in `__post_init__` (Python, the operator's and CLI's check) and in `cel_rules` (core CEL,
the API server's check); the tests evaluate both on the same documents and require the same
verdict. Decode a spec with `decode_spec` (`AIPerfJobSpec`/`AIPerfSweepSpec`: the envelope and
the benchmark read).

Secrets never appear in a CR: the endpoint's API key and header values come from Secrets named
in `podTemplate.env` (AIPerf's `AIPERF_INJECTED_API_KEY`/`OPENAI_API_KEY`,
`AIPERF_INJECTED_HEADERS`), plain environment variables may not carry them either.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from aiperf.config import SECRET_ENV_VARS, Benchmark, ConfigError, FileDataset, PhaseKind
from aiperf.config.sweep import SweepType  # one sweep model: the planner's, shared with config files
from aiperf.kube.names import (  # the API's names: the manifests' too
    API_GROUP,
    API_VERSION,
    JOB_KIND,
    SWEEP_KIND,
)
from aiperf.kube.settings import (
    API_KEY_ENV_ALIASES,
    DEFAULT_WORKERS_PER_POD,
    HEADERS_ENV_ALIASES,
    derived_total_workers,
)
from aiperf.messages import ServiceType, SystemState

__all__ = [
    "API_GROUP", "API_KEY_ENV_NAMES", "API_VERSION", "HEADERS_ENV_NAME", "JOB_KIND", "RESERVED_LABELS",
    "SWEEP_KIND", "AIPerfJobSpec", "AIPerfJobStatus", "AIPerfSweepSpec", "AIPerfSweepStatus", "Aggregation",
    "AggregationPhase", "CelRule", "ChildEvent", "ChildMetadata", "ChildRef", "Condition", "ControllerFailure",
    "EnvVar", "EnvVarSource", "FailurePolicy", "JobPhase", "JobSpecSchema", "LocalObjectReference", "MultiRun",
    "PhaseStatus", "PodTemplate", "ResourceMode", "ResourceRequirements", "Scenario", "Scheduling",
    "SecretKeySelector", "StartupIssue", "SweepSpec", "SweepSpecSchema", "SweepType", "Toleration", "WorkersStatus",
    "decode_spec", "read_benchmark",
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
    mode: a busy node cannot squeeze a measurement); `burstable` requests only (AIPerf's
    default); `none` neither (the namespace's defaults, a LimitRange, apply)."""

    BURSTABLE = "burstable"
    GUARANTEED = "guaranteed"
    NONE = "none"


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


API_KEY_ENV_NAMES = API_KEY_ENV_ALIASES
"""Pod environment variables (from a Secret) that carry the endpoint's API key (AIPerf's names)."""
HEADERS_ENV_NAME = HEADERS_ENV_ALIASES[0]
"""Pod environment variable (from a Secret) that carries a JSON object of header -> value."""
_SECRET_ENV = [*SECRET_ENV_VARS, *API_KEY_ENV_NAMES, HEADERS_ENV_NAME]


class EnvVar(_Wire, frozen=True, kw_only=True):
    """An environment variable of every container: a plain `value` or `valueFrom` a Secret, exactly
    one. The endpoint's secrets (`AIPERF_INJECTED_API_KEY`, `OPENAI_API_KEY`,
    `AIPERF_INJECTED_HEADERS`, and our `AIPERF_API_KEY`, `AIPERF_HEADERS_JSON`) never as a plain
    value."""

    name: EnvName
    value: str | None = None
    value_from: EnvVarSource | None = None

    cel_rules = (
        CelRule(f"{present('self.value')} != {present('self.valueFrom')}",
                "give exactly one of value and valueFrom", ".value"),
        CelRule(f"!(self.name in {_SECRET_ENV!r}) || !{present('self.value')}",
                "a secret never goes in a CR as a plain value: use valueFrom.secretKeyRef", ".value"),
    )

    def __post_init__(self) -> None:
        if (self.value is None) == (self.value_from is None):
            raise ValueError("value: give exactly one of value and valueFrom")
        if self.name in _SECRET_ENV and self.value is not None:
            raise ValueError("value: a secret never goes in a CR as a plain value: use valueFrom.secretKeyRef")


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


K8sObject = dict[str, Any]
"""A Kubernetes object (a Volume, an Affinity, a Container, ...) passed to the pods as written;
the API server checks it against its own schema when the pods are created."""

_RESERVED_POD_KEYS = ["containers", "restartPolicy", "volumes", "serviceAccountName", "initContainers",
                      "hostNetwork", "hostPID", "hostIPC", "nodeName"]
"""Pod spec keys `extraPodSpec` may not set: aiperf's own, or ones that escape the pod's isolation."""


def _privileged(container_ctx: str) -> str:
    return (f"!has({container_ctx}.privileged) || {container_ctx}.privileged != true) && "
            f"(!has({container_ctx}.allowPrivilegeEscalation) || {container_ctx}.allowPrivilegeEscalation != true")


class PodTemplate(_Wire, frozen=True, kw_only=True):
    """What the CR may set on the pods it runs (AIPerf's `podTemplate`): scheduling (`nodeSelector`,
    `tolerations`, `affinity`, `topologySpreadConstraints`, `priorityClassName`, `schedulerName`,
    `runtimeClassName`), metadata, the ServiceAccount, image pulling, `env` of every container,
    `volumes` with `volumeMounts` into every container (model caches, trace PVCs), security
    contexts (`podSecurityContext`; `containerSecurityContext` merged into every container's own,
    privilege escalation refused), `initContainers` run before the services, DNS and host aliases,
    `extraPodSpec` for any other pod field but aiperf's own; and (aiperf's) `resources` per
    service type (`worker`, `record-processor`, ...; unset: the service catalog's defaults)."""

    node_selector: dict[QualifiedName, LabelValue] = {}
    tolerations: Annotated[list[Toleration], Meta(max_length=64)] = []
    affinity: K8sObject = {}
    topology_spread_constraints: list[K8sObject] = []
    image_pull_secrets: Annotated[list[LocalObjectReference], Meta(max_length=16)] = []
    annotations: dict[QualifiedName, str] = {}
    labels: dict[QualifiedName, LabelValue] = {}
    service_account_name: DnsSubdomain | None = None
    priority_class_name: DnsSubdomain | None = None
    runtime_class_name: DnsSubdomain | None = None
    scheduler_name: str | None = None
    env: Annotated[list[EnvVar], Meta(max_length=64)] = []
    volumes: Annotated[list[K8sObject], Meta(max_length=64)] = []
    volume_mounts: Annotated[list[K8sObject], Meta(max_length=64)] = []
    container_security_context: K8sObject = {}
    pod_security_context: K8sObject = {}
    init_containers: Annotated[list[K8sObject], Meta(max_length=16)] = []
    share_process_namespace: bool = False
    host_aliases: list[K8sObject] = []
    dns_policy: Literal["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"] | None = None
    dns_config: K8sObject = {}
    termination_grace_period_seconds: NonNegativeInt | None = None
    extra_pod_spec: K8sObject = {}
    resources: dict[ServiceType, ResourceRequirements] = {}

    cel_rules = (
        CelRule(f"!has(self.labels) || !self.labels.exists(k, k in {list(RESERVED_LABELS)!r})",
                "labels: app.kubernetes.io/name, instance and component are set by aiperf, leave them out",
                ".labels"),
        CelRule("!has(self.env) || self.env.all(e, self.env.exists_one(f, f.name == e.name))",
                "env: each name once", ".env"),
        CelRule("!has(self.volumes) || self.volumes.all(v, has(v.name) && "
                "self.volumes.exists_one(w, has(w.name) && w.name == v.name))",
                "volumes: each needs a name, each name once", ".volumes"),
        CelRule("!has(self.volumeMounts) || self.volumeMounts.all(m, has(m.name) && has(m.mountPath) && "
                "has(self.volumes) && self.volumes.exists(v, has(v.name) && v.name == m.name))",
                "volumeMounts: each needs a name and mountPath, naming one of volumes", ".volumeMounts"),
        CelRule(f"!has(self.containerSecurityContext) || (({_privileged('self.containerSecurityContext')}))",
                "containerSecurityContext: privileged and allowPrivilegeEscalation are refused",
                ".containerSecurityContext"),
        CelRule("!has(self.initContainers) || self.initContainers.all(c, has(c.name) && has(c.image) && "
                f"(!has(c.securityContext) || (({_privileged('c.securityContext')}))))",
                "initContainers: each needs a name and an image; privileged and allowPrivilegeEscalation "
                "are refused", ".initContainers"),
        CelRule("!has(self.podSecurityContext) || ((!has(self.podSecurityContext.runAsUser) || "
                "self.podSecurityContext.runAsUser != 0) && (!has(self.podSecurityContext.runAsNonRoot) || "
                "self.podSecurityContext.runAsNonRoot != false))",
                "podSecurityContext: running as root (runAsUser 0, runAsNonRoot false) is refused",
                ".podSecurityContext"),
        CelRule(f"!has(self.extraPodSpec) || !self.extraPodSpec.exists(k, k in {_RESERVED_POD_KEYS!r})",
                f"extraPodSpec: {', '.join(_RESERVED_POD_KEYS)} are aiperf's own or break the pod's isolation",
                ".extraPodSpec"),
    )

    def __post_init__(self) -> None:
        if any(key in RESERVED_LABELS for key in self.labels):
            raise ValueError("labels: app.kubernetes.io/name, instance and component are set by aiperf, "
                             "leave them out")
        names = [e.name for e in self.env]
        if len(set(names)) != len(names):
            raise ValueError("env: each name once")
        volumes = [v.get("name") for v in self.volumes]
        if None in volumes or len(set(volumes)) != len(volumes):
            raise ValueError("volumes: each needs a name, each name once")
        if any(m.get("name") not in volumes or "mount_path" not in m and "mountPath" not in m
               for m in self.volume_mounts):
            raise ValueError("volumeMounts: each needs a name and mountPath, naming one of volumes")
        if _escalates(self.container_security_context):
            raise ValueError("containerSecurityContext: privileged and allowPrivilegeEscalation are refused")
        if any(not c.get("name") or not c.get("image") or _escalates(c.get("securityContext") or {})
               for c in self.init_containers):
            raise ValueError("initContainers: each needs a name and an image; privileged and "
                             "allowPrivilegeEscalation are refused")
        ctx = self.pod_security_context
        if ctx.get("runAsUser") == 0 or ctx.get("runAsNonRoot") is False:
            raise ValueError("podSecurityContext: running as root (runAsUser 0, runAsNonRoot false) is refused")
        if set(self.extra_pod_spec) & set(_RESERVED_POD_KEYS):
            raise ValueError(f"extraPodSpec: {', '.join(_RESERVED_POD_KEYS)} are aiperf's own or break the "
                             "pod's isolation")


def _escalates(context: Mapping[str, Any]) -> bool:
    return context.get("privileged") is True or context.get("allowPrivilegeEscalation") is True


class FailurePolicy(_Wire, frozen=True, kw_only=True):
    """What a failed run does to the sweep (AIPerf's): `continue` with the next one or `abort` the
    sweep; `maxFailures` > 0 also ends it after that many failed runs."""

    on_child_failure: Literal["continue", "abort"] = "continue"
    max_failures: NonNegativeInt = 0


class Scheduling(_Wire, frozen=True, kw_only=True):
    """AIPerf's Kueue admission (`queueName`, `priorityClass`): read, refused unless empty."""

    queue_name: str | None = None
    priority_class: str | None = None


class _WorkloadEnvelope(_Wire, frozen=True, kw_only=True):
    """Fields of both kinds beside the benchmark (AIPerf's deployment envelope, camelCase):
    `image` (every container), `imagePullPolicy`, `resourceMode`, `connectionsPerWorker` (sizes
    the run when `benchmark.runtime.workers` is not given: peak phase concurrency / this, default
    100), `timeoutSeconds` (0 or unset: none), `ttlSecondsAfterFinished`, `keepFailedPods` (the
    run's pods stay until the CR goes, for debugging), `cancel`, `podTemplate`; the config
    file's `schemaVersion`, `variables` and `randomSeed`; `skipEndpointCheck` (the operator does
    not probe the endpoint), `noSweepTable`; an AIPerfSweep's `failurePolicy`. Read but refused
    unless empty (`decode_spec`): `scheduling` (Kueue), `resultsTtlDays`, `plot`. The benchmark's own `runtime` (workers, per pod) and
    `logging.level` size and tune the run; its API key and header values come from the Secrets
    named by `podTemplate.env` (`AIPERF_INJECTED_API_KEY` or `OPENAI_API_KEY`,
    `AIPERF_INJECTED_HEADERS`)."""

    schema_version: Literal["2.0"] | None = None
    image: ImageRef | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    resource_mode: ResourceMode | None = None
    connections_per_worker: Annotated[int, Meta(ge=1)] | None = None
    timeout_seconds: Annotated[float, Meta(ge=0)] | None = None
    ttl_seconds_after_finished: NonNegativeInt | None = None
    keep_failed_pods: bool = False
    cancel: bool = False
    pod_template: PodTemplate | None = None
    variables: dict[str, Any] = {}
    random_seed: int | None = None
    skip_endpoint_check: bool = False
    no_sweep_table: bool = False
    failure_policy: FailurePolicy | None = None
    scheduling: Scheduling | None = None
    results_ttl_days: NonNegativeInt | None = None
    plot: dict[str, Any] | None = None


class Scenario(_Wire, frozen=True, kw_only=True):
    """One run of a `scenarios` sweep: a partial benchmark merged over `spec.benchmark`."""

    name: Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=63)]
    benchmark: dict[str, Any] = {}


class SweepSpec(_Wire, frozen=True, kw_only=True):
    """The variations of a sweep (AIPerf's `sweep:`): `parameters` maps a dotted path into the
    benchmark (`phases.profiling.concurrency`, or a bare name such as `concurrency`) to the
    values it takes (`grid`, `zip`: every list the same length), or `runs` lists named partial
    benchmarks (`scenarios`), or `samples` points of the `dimensions` are drawn with `seed`
    (`latin_hypercube`, `sobol`: `aiperf.config.sweep.Dimension`, `aiperf.config.qmc`);
    `cooldownSeconds` between variations; `sameSeed` gives every variation the trial's seed."""

    type: SweepType = SweepType.GRID
    parameters: Annotated[dict[str, Any], Meta(max_length=8)] = {}
    runs: Annotated[list[Scenario], Meta(max_length=64)] = []
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0
    iteration_order: Literal["repeated"] = "repeated"
    same_seed: bool = False
    samples: Annotated[int, Meta(ge=2, le=2**20)] | None = None
    seed: Annotated[int, Meta(ge=0)] | None = None
    dimensions: Annotated[list[dict[str, Any]], Meta(max_length=8)] = []
    scramble: bool | None = None
    optimization: Literal["random-cd", "lloyd"] | None = None
    label_format: Literal["index", "kv"] | None = None

    cel_rules = (
        CelRule("!has(self.type) || self.type != 'zip' || !has(self.parameters) || self.parameters.all(a, "
                "self.parameters.all(b, size(self.parameters[a]) == size(self.parameters[b])))",
                "parameters: a zip sweep needs the same number of values for every parameter",
                ".parameters"),
        CelRule("(has(self.type) && (self.type == 'latin_hypercube' || self.type == 'sobol')) ? (has(self.samples) "
                "&& has(self.dimensions) && size(self.dimensions) > 0 && (!has(self.parameters) || "
                "size(self.parameters) == 0) && (!has(self.runs) || size(self.runs) == 0)) : "
                "(has(self.type) && self.type == 'scenarios') ? (has(self.runs) && size(self.runs) > 0 && "
                "(!has(self.parameters) || size(self.parameters) == 0)) : (has(self.parameters) && "
                "size(self.parameters) > 0 && (!has(self.runs) || size(self.runs) == 0))",
                "parameters: a grid or zip sweep needs parameters, a scenarios sweep runs, a latin_hypercube or "
                "sobol sweep samples and dimensions (one of them)", ".parameters"),
    )

    def __post_init__(self) -> None:
        if self.type is SweepType.ZIP and len({len(v) if isinstance(v, list) else -1
                                              for v in self.parameters.values()}) > 1:
            raise ValueError("parameters: a zip sweep needs the same number of values for every parameter")
        if self.type in (SweepType.LATIN_HYPERCUBE, SweepType.SOBOL):
            good = self.samples is not None and bool(self.dimensions) and not self.parameters and not self.runs
        elif self.type is SweepType.SCENARIOS:
            good = bool(self.runs) and not self.parameters
        else:
            good = bool(self.parameters) and not self.runs
        if not good:
            raise ValueError("parameters: a grid or zip sweep needs parameters, a scenarios sweep runs, a "
                             "latin_hypercube or sobol sweep samples and dimensions (one of them)")


class MultiRun(_Wire, frozen=True, kw_only=True):
    """Repeat every variation `numRuns` times (trials), `cooldownSeconds` apart (AIPerf's
    `multiRun`, statistics at `confidenceLevel`). `minRuns` (aiperf's): a variation with fewer
    successful trials than this fails the sweep (its aggregate is still written); at most
    `numRuns`."""

    num_runs: Annotated[int, Meta(ge=1, le=100)] = 1
    cooldown_seconds: Annotated[float, Meta(ge=0)] = 0.0
    confidence_level: Annotated[float, Meta(gt=0, lt=1)] = 0.95
    set_consistent_seed: bool = True
    vary_seed_per_trial: bool = False
    disable_warmup_after_first: bool = True
    min_runs: Annotated[int, Meta(ge=1, le=100)] = 1

    cel_rules = (
        CelRule("(has(self.minRuns) ? self.minRuns : 1) <= (has(self.numRuns) ? self.numRuns : 1)",
                "minRuns: at most numRuns", ".minRuns"),
    )

    def __post_init__(self) -> None:
        if self.min_runs > self.num_runs:
            raise ValueError("min_runs: at most num_runs")


class ChildMetadata(_Wire, frozen=True, kw_only=True):
    """Labels and annotations of every child AIPerfJob of a sweep (the sweep's own tracking labels win)."""

    labels: dict[QualifiedName, LabelValue] = {}
    annotations: dict[QualifiedName, str] = {}


BenchmarkBody = Annotated[dict[str, Any], Meta(description=(
    "The benchmark: AIPerf's config v2 `benchmark:` body (models, endpoint, datasets, phases, artifacts, "
    "runtime, ...), camelCase or snake_case, AIPerf's shorthands, Jinja2 templates over `variables`. Kept as "
    "written; the operator reads it with the benchmark model (`aiperf config schema`) and fails the CR with "
    "one line when it cannot."))]


class JobSpecSchema(_WorkloadEnvelope, frozen=True, kw_only=True):
    """The wire form of an AIPerfJob's spec (the CRD's schema): `benchmark` is AIPerf's config v2
    body as written, camelCase or snake_case, shorthands and all, read by `aiperf.config` when the
    spec is decoded (`decode_spec`); `multiRun` may only say one run. After creation only `cancel`
    and `timeoutSeconds` may change."""

    benchmark: BenchmarkBody
    multi_run: MultiRun | None = None

    MUTABLE: ClassVar[frozenset[str]] = frozenset({"cancel", "timeoutSeconds"})

    cel_rules = (
        CelRule("!has(self.multiRun) || !has(self.multiRun.numRuns) || self.multiRun.numRuns == 1",
                "multiRun: an AIPerfJob is one run; repeated runs are an AIPerfSweep", ".multiRun"),
    )

    def __post_init__(self) -> None:
        if self.multi_run is not None and self.multi_run.num_runs != 1:
            raise ValueError("multiRun: an AIPerfJob is one run; repeated runs are an AIPerfSweep")


class SweepSpecSchema(_WorkloadEnvelope, frozen=True, kw_only=True):
    """The wire form of an AIPerfSweep's spec: an AIPerfJob's plus `sweep` (repeated runs of one
    benchmark: a `scenarios` sweep of one run, as AIPerf writes it), `multiRun`, `failurePolicy`
    and `childMetadata`. After creation only `cancel` and `ttlSecondsAfterFinished` may change."""

    benchmark: BenchmarkBody
    sweep: SweepSpec
    multi_run: MultiRun | None = None
    child_metadata: ChildMetadata | None = None

    MUTABLE: ClassVar[frozenset[str]] = frozenset({"cancel", "ttlSecondsAfterFinished"})


@dataclass(frozen=True, kw_only=True)
class AIPerfJobSpec:
    """A decoded AIPerfJob spec: the envelope as written and the benchmark read into the model
    (its `${VAR}` references and Jinja2 `variables` resolved, AIPerf's shapes understood)."""

    envelope: JobSpecSchema | SweepSpecSchema
    benchmark: Benchmark

    @property
    def pod_template(self) -> PodTemplate | None:
        """`spec.podTemplate`."""
        return self.envelope.pod_template

    def secret(self, names: Sequence[str]) -> SecretKeySelector | None:
        """The Secret key of the first `podTemplate.env` entry named one of `names`."""
        for entry in self.pod_template.env if self.pod_template else []:
            if entry.name in names and entry.value_from is not None:
                return entry.value_from.secret_key_ref
        return None

    @property
    def workers_per_pod(self) -> int:
        """`benchmark.runtime.workersPerPod`, else 10 (AIPerf's default)."""
        return self.benchmark.runtime.workers_per_pod or DEFAULT_WORKERS_PER_POD

    def total_workers(self) -> int:
        """`benchmark.runtime.workers` when given (as written); else AIPerf's rule: the peak
        concurrency of the phases / `connectionsPerWorker` (default 100), rounded up, at least
        `runtime.workersMin`, then up to whole pods when it needs more than one."""
        runtime = self.benchmark.runtime
        if runtime.workers:
            return runtime.workers
        return derived_total_workers(peak_concurrency=max((p.concurrency or 1 for p in self.benchmark.phases), default=1),
                                     workers_per_pod=self.workers_per_pod,
                                     connections_per_worker=self.envelope.connections_per_worker,
                                     workers_min=runtime.workers_min)

    @property
    def api_key_secret(self) -> SecretKeySelector | None:
        """The Secret holding the endpoint's API key (`AIPERF_INJECTED_API_KEY`, `OPENAI_API_KEY`)."""
        return self.secret(API_KEY_ENV_NAMES)

    @property
    def headers_secret(self) -> SecretKeySelector | None:
        """The Secret holding the JSON object of header values (`AIPERF_INJECTED_HEADERS`)."""
        return self.secret((HEADERS_ENV_NAME,))


@dataclass(frozen=True, kw_only=True)
class AIPerfSweepSpec(AIPerfJobSpec):
    """A decoded AIPerfSweep spec: the envelope, the base benchmark, and its sweep and trials as
    the planner reads them (`aiperf.config.sweep`)."""

    envelope: SweepSpecSchema
    sweep: Any  # aiperf.config.sweep.Sweep | None
    multi_run: MultiRun | None


# -- status ------------------------------------------------------------------------------------

class _Status(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """Base of the status models: unknown fields are kept out by the API server's pruning, and an
    older reader skips newer fields (no `forbid_unknown_fields`)."""


class JobPhase(enum.StrEnum):
    """`status.phase`, the operator's view of a run (`Queued`: its JobSet is held suspended by a
    queue such as Kueue)."""

    PENDING = "Pending"
    QUEUED = "Queued"
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


def _spec_error(exc: msgspec.ValidationError) -> ConfigError:
    from aiperf.config.loader import describe_error

    where, what = describe_error(exc)
    return ConfigError(f"spec.{where}: {what}" if where else f"spec: {what}")


def _refuse_unbuilt(envelope: JobSpecSchema | SweepSpecSchema, kind: str) -> None:
    """AIPerf's envelope fields we read but do not build, refused by name unless they ask for nothing."""
    if envelope.scheduling is not None and (envelope.scheduling.queue_name or envelope.scheduling.priority_class):
        raise ConfigError("spec.scheduling: not supported (Kueue queues and priorities are not built)")
    if envelope.results_ttl_days is not None:
        raise ConfigError("spec.resultsTtlDays: not supported (the operator keeps AIPERF_RESULTS_KEEP runs per job)")
    if envelope.plot:
        raise ConfigError("spec.plot: not supported (`aiperf plot` draws its fixed set of plots)")
    if kind == JOB_KIND and envelope.failure_policy not in (None, FailurePolicy()):
        raise ConfigError("spec.failurePolicy: only an AIPerfSweep's runs follow a failure policy")


def read_benchmark(body: Any, random_seed: int | None = None, variables: Any = None) -> Benchmark:
    """A CR's `spec.benchmark` (rendered) read as a config file's benchmark, `random_seed` the
    spec's `randomSeed`, `variables` its `variables` (resolved; for `artifacts.userFiles`). Secrets only by reference: an inline API key (other than AIPerf's
    `<redacted>` placeholder) or header value is refused. Raises `aiperf.config.ConfigError`
    `spec.benchmark[.<path>]: <reason>`."""
    from aiperf.config import decode_benchmark, normalize
    from aiperf.config.loader import REDACTED

    try:
        document, secrets = normalize({"benchmark": body, "random_seed": random_seed, "variables": variables})
        benchmark = decode_benchmark(document)
    except ConfigError as exc:
        where, sep, _ = str(exc).partition(": ")
        raise ConfigError(f"spec.benchmark.{exc}" if sep and " " not in where else f"spec.benchmark: {exc}") from None
    if secrets.api_key is not None:
        raise ConfigError("spec.benchmark.endpoint.apiKey: a secret never goes in a CR as a plain value: write "
                          f"{REDACTED} and give podTemplate.env {API_KEY_ENV_NAMES[0]} from a Secret")
    if secrets.headers:
        raise ConfigError("spec.benchmark.endpoint.headers: header values are secrets, never in a CR: give "
                          f"podTemplate.env {HEADERS_ENV_NAME} (a JSON object) from a Secret")
    return benchmark


def _check_dataset_file(benchmark: Benchmark, template: PodTemplate | None) -> None:
    """A dataset file must lie on a volume the pods mount (`podTemplate.volumes`/`volumeMounts`,
    mounted into every container: the dataset-manager reads it there, as AIPerf's recipes mount
    their trace PVCs); inline records need none. Raises `ConfigError` naming the path."""
    dataset = benchmark.dataset
    if not isinstance(dataset, FileDataset) or dataset.path is None:
        return
    path = PurePosixPath(dataset.path)
    mounts = [m.get("mountPath") or m.get("mount_path") for m in (template.volume_mounts if template else [])]
    if path.is_absolute() and any(isinstance(m, str) and path.is_relative_to(m) for m in mounts):
        return
    raise ConfigError(f"spec.benchmark.datasets[0].path: {dataset.path}: not on a volume the pods mount; mount "
                      "the volume holding it with podTemplate.volumes and volumeMounts (an absolute path under "
                      "a mountPath), or give the records inline")


def decode_spec(spec: Any, kind: str, environ: Mapping[str, str] | None = None) -> AIPerfJobSpec | AIPerfSweepSpec:
    """The decoded spec of a CR of `kind` (`AIPerfJob` or `AIPerfSweep`) from its `spec` mapping:
    `${VAR}` references (from `environ`, by default the process's) and Jinja2 `variables`
    resolved, the envelope checked against its model, the benchmark read as a config file's
    (AIPerf's shapes; features we do not build refused by name; a dataset file on a volume the
    pods mount). Secrets only by reference: an inline API key (other than AIPerf's `<redacted>`
    placeholder) or header value is refused. Raises `aiperf.config.ConfigError` with one line,
    `spec.<path>: <reason>`."""
    from aiperf.config.templating import render_document

    if not isinstance(spec, dict):
        raise ConfigError("spec: expected a mapping")
    rendered = render_document(spec, os.environ if environ is None else environ)
    schema: type[JobSpecSchema | SweepSpecSchema] = JobSpecSchema if kind == JOB_KIND else SweepSpecSchema
    try:
        envelope = msgspec.convert(rendered, schema)
    except msgspec.ValidationError as exc:
        raise _spec_error(exc) from None
    _refuse_unbuilt(envelope, kind)
    benchmark = read_benchmark(envelope.benchmark, envelope.random_seed, envelope.variables)
    _check_dataset_file(benchmark, envelope.pod_template)
    if kind == JOB_KIND:
        return AIPerfJobSpec(envelope=envelope, benchmark=benchmark)
    from aiperf.config.sweep import Sweep, decode_block

    assert isinstance(envelope, SweepSpecSchema)
    sweep = decode_block(msgspec.to_builtins(envelope.sweep), Sweep, "spec.sweep", "")
    return AIPerfSweepSpec(envelope=envelope, benchmark=benchmark, sweep=sweep, multi_run=envelope.multi_run)
