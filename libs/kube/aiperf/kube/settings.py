"""`KubeSettings`: where and how one run is deployed (everything but the benchmark itself).

Invalid settings cannot be built: construction raises `KubeConfigError` with one line naming the
field and the fix (decoding with msgspec reports it as a `msgspec.ValidationError`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from aiperf.config import SECRET_ENV_VARS
from aiperf.config.catalog import CATALOG
from aiperf.kube.layout import WorkerLayout
from aiperf.kube.names import (
    CONTROLLER_JOB,
    JOB_NAME_ENV,
    JOB_NAMESPACE_ENV,
    JOB_UID_ENV,
    POD_NAME_SUFFIX,
    WORKERS_JOB,
    WORKERS_LAST_JOB,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_name,
    is_image_reference,
    is_secret_key,
    jobset_name,
    pod_hostname,
)
from aiperf.messages import ServiceType

API_KEY_ENV, HEADERS_ENV = SECRET_ENV_VARS
API_KEY_ENV_ALIASES = ("AIPERF_INJECTED_API_KEY", "OPENAI_API_KEY")
"""AIPerf's names of the environment variable holding the endpoint's API key (from a Secret)."""
HEADERS_ENV_ALIASES = ("AIPERF_INJECTED_HEADERS",)
"""AIPerf's name of the environment variable holding the JSON object of header values."""
_ENDPOINT_ENV = {API_KEY_ENV: (API_KEY_ENV, *API_KEY_ENV_ALIASES), HEADERS_ENV: (HEADERS_ENV, *HEADERS_ENV_ALIASES)}
DEFAULT_WORKERS_PER_POD = 10
"""Workers in one worker pod when nothing says otherwise (AIPerf's default)."""
MAX_PER_POD = 256
"""Most workers (and record processors) in one pod: keeps per-container health ports apart."""

RESERVED_VOLUMES = frozenset({"ipc", "artifacts", "config", "curve"})
"""Volume names of aiperf's own volumes (`aiperf.kube.containers`)."""
RESERVED_MOUNT_PATHS = ("/aiperf", "/config", "/curve")
"""Where aiperf's own volumes are mounted; a user's mount may not be at or below them."""

RESERVED_ENV = frozenset({"AIPERF_CONTROLLER_HOST", "AIPERF_JOB_INDEX", "AIPERF_HEALTH_PORT",
                          JOB_NAME_ENV, JOB_NAMESPACE_ENV, JOB_UID_ENV})
"""Environment variables the manifests set themselves."""

NAME_LABEL, INSTANCE_LABEL, COMPONENT_LABEL = (
    "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component")


DEFAULT_CONNECTIONS_PER_WORKER = 100
"""AIPerf's default of `connectionsPerWorker`: concurrent requests one worker carries."""


def derived_total_workers(*, peak_concurrency: int, workers_per_pod: int, connections_per_worker: int | None = None,
                          workers_min: int | None = None) -> int:
    """AIPerf's worker count when none is given: the peak concurrency / `connections_per_worker`
    (default 100), rounded up, at least `workers_min`, then up to whole pods of `workers_per_pod`
    when it needs more than one pod."""
    per_worker = connections_per_worker or DEFAULT_CONNECTIONS_PER_WORKER
    total = max(-(-max(peak_concurrency, 1) // per_worker), workers_min or 0, 1)
    return total if total <= workers_per_pod else -(-total // workers_per_pod) * workers_per_pod


class KubeConfigError(ValueError):
    """The deployment cannot be generated as asked; the message is one line for the user."""


class ContainerResources(msgspec.Struct, frozen=True, kw_only=True):
    """Requests and limits of one container (`{"cpu": "500m", "memory": "512Mi"}`)."""

    requests: dict[str, str] = {}
    limits: dict[str, str] = {}

    def to_manifest(self) -> dict[str, dict[str, str]]:
        """The container's `resources` object (empty parts left out)."""
        out: dict[str, dict[str, str]] = {}
        if self.limits:
            out["limits"] = dict(self.limits)
        if self.requests:
            out["requests"] = dict(self.requests)
        return out


def _equal(cpu: str, memory: str) -> ContainerResources:
    # requests == limits: Guaranteed QoS, so a busy node cannot squeeze a measurement.
    both = {"cpu": cpu, "memory": memory}
    return ContainerResources(requests=both, limits=both)


DEFAULT_RESOURCES: dict[ServiceType, ContainerResources] = {
    spec.type: _equal(spec.cpu, spec.memory) for spec in CATALOG}
"""Per-container defaults (the service catalog's); `KubeSettings.resources` replaces them per
service type."""


class SecretRef(msgspec.Struct, frozen=True, kw_only=True):
    """Key `key` of Secret `secret`, written `secret/key` on the command line."""

    secret: str
    key: str

    @classmethod
    def parse(cls, text: str, *, what: str) -> SecretRef:
        """Parse `secret/key`; raises `KubeConfigError` naming `what` when malformed."""
        secret, sep, key = text.partition("/")
        if not sep or not is_dns1123_subdomain(secret) or not is_secret_key(key):
            raise KubeConfigError(f"{what} {text!r}: expected SECRET/KEY, e.g. llm-api/api-key "
                                  "(SECRET a DNS-1123 name, KEY letters, digits, '-', '_', '.')")
        return cls(secret=secret, key=key)

    def to_env(self, env_name: str) -> dict[str, Any]:
        """The container env entry reading this key (`valueFrom.secretKeyRef`)."""
        return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": self.secret, "key": self.key}}}


class PodOverrides(msgspec.Struct, frozen=True, kw_only=True):
    """Pod fields taken as written (Kubernetes' own camelCase objects, AIPerf's `podTemplate`):
    `volumes` are added to every pod and `volume_mounts` to every container; `affinity`,
    `topology_spread_constraints`, `priority_class_name`, `runtime_class_name`, `scheduler_name`,
    `host_aliases`, `dns_policy`, `dns_config`, `termination_grace_period_seconds`,
    `share_process_namespace` and `init_containers` are the pods' own; `pod_security_context` is
    merged over aiperf's (RuntimeDefault seccomp) and `container_security_context` over every
    container's (no privilege escalation: the model refuses privileged ones); `extra_pod_spec`
    adds any other pod field."""

    volumes: list[dict[str, Any]] = []
    volume_mounts: list[dict[str, Any]] = []
    affinity: dict[str, Any] = {}
    topology_spread_constraints: list[dict[str, Any]] = []
    priority_class_name: str | None = None
    runtime_class_name: str | None = None
    scheduler_name: str | None = None
    host_aliases: list[dict[str, Any]] = []
    dns_policy: str | None = None
    dns_config: dict[str, Any] = {}
    termination_grace_period_seconds: int | None = None
    share_process_namespace: bool = False
    init_containers: list[dict[str, Any]] = []
    pod_security_context: dict[str, Any] = {}
    container_security_context: dict[str, Any] = {}
    extra_pod_spec: dict[str, Any] = {}


class KubeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Deployment of one run named `name` into `namespace`.

    Images are `<image_registry>/aiperf/<svc>:<image_tag>` (`aiperf/<svc>:<tag>` with an empty
    registry), or `image` for every container when set (`--image`, an AIPerfJob's `spec.image`;
    it must be a valid image reference). `total_workers` are split into pods of
    `workers_per_pod`; the last pod may hold fewer. `record_processors_per_pod` defaults to
    max(1, workers_per_pod // 4).

    Secrets only travel as Secret references: `env_from_secrets` maps `ENV` to `secret/key` for
    every container; `api_key_secret` and `headers_secret` (`secret/key`) feed `AIPERF_API_KEY`
    and `AIPERF_HEADERS_JSON` into worker containers only (those two may also be given through
    `env_from_secrets`, with the same effect). `require_api_key` says the run authenticates with
    an API key, so generation fails without a Secret for it. `service_account` None gives the
    run its own ServiceAccount `aiperf-<name>` (created and deleted with the run); a name uses
    that existing account instead. `pod` holds the pod fields taken as written (`PodOverrides`);
    `keep_failed_pods` leaves the JobSet without a TTL, so a failed run's pods stay for debugging.
    """

    name: str
    namespace: str = "default"
    image_registry: str = "localhost"
    image_tag: str = "latest"
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    total_workers: int = 10
    workers_per_pod: int = DEFAULT_WORKERS_PER_POD
    record_processors_per_pod: int | None = None
    resources: dict[str, ContainerResources] = {}
    env_vars: dict[str, str] = {}
    env_from_secrets: dict[str, str] = {}
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    image_pull_secrets: list[str] = []
    ttl_seconds: int = 300
    service_account: str | None = None
    api_key_secret: str | None = None
    headers_secret: str | None = None
    require_api_key: bool = False
    keep_failed_pods: bool = False
    pod: PodOverrides = PodOverrides()

    def __post_init__(self) -> None:
        for problem in self._problems():
            raise KubeConfigError(problem)

    @property
    def record_processors_per_group(self) -> int:
        """Record processors in each worker pod (the default applied)."""
        if self.record_processors_per_pod is not None:
            return self.record_processors_per_pod
        return max(1, self.workers_per_pod // 4)

    @property
    def layout(self) -> WorkerLayout:
        """How `total_workers` are split into worker pods."""
        return WorkerLayout.split(total_workers=self.total_workers, workers_per_pod=self.workers_per_pod,
                                  record_processors_per_pod=self.record_processors_per_group)

    @property
    def service_account_name(self) -> str:
        """The ServiceAccount the pods run as and the RoleBinding binds: the run's own
        (`aiperf-<name>`) unless `service_account` names one."""
        return self.service_account or jobset_name(self.name)

    def resources_for(self, service_type: ServiceType) -> ContainerResources:
        """Resources of a container running `service_type`."""
        return self.resources.get(str(service_type), DEFAULT_RESOURCES[service_type])

    def plain_secret_env(self) -> dict[str, SecretRef]:
        """`env_from_secrets` without the endpoint secrets: set in every container."""
        endpoint = {name for names in _ENDPOINT_ENV.values() for name in names}
        return {env: SecretRef.parse(ref, what=f"env_from_secrets {env}")
                for env, ref in self.env_from_secrets.items() if env not in endpoint}

    def endpoint_secret_env(self) -> dict[str, SecretRef]:
        """Where `AIPERF_API_KEY` / `AIPERF_HEADERS_JSON` come from (only those mapped; AIPerf's
        `AIPERF_INJECTED_API_KEY`/`OPENAI_API_KEY` and `AIPERF_INJECTED_HEADERS` in
        `env_from_secrets` mean the same): set in worker containers, the only ones that talk to
        the endpoint."""
        out: dict[str, SecretRef] = {}
        for env, ref in ((API_KEY_ENV, self.api_key_secret), (HEADERS_ENV, self.headers_secret)):
            text = ref or next((self.env_from_secrets[n] for n in _ENDPOINT_ENV[env] if n in self.env_from_secrets),
                               None)
            if text:
                out[env] = SecretRef.parse(text, what=env)
        return out

    def _problems(self) -> list[str]:
        problems: list[str] = []

        def need(ok: bool, message: str) -> None:
            if not ok:
                problems.append(message)

        need(is_dns1123_label(self.name) and len(jobset_name(self.name)) <= 63,
             f"name {self.name!r}: must be lowercase letters, digits and '-', starting and ending "
             "with a letter or digit (e.g. llama-c64)")
        need(is_dns1123_label(self.namespace), f"namespace {self.namespace!r}: must be a DNS-1123 label")
        need(bool(self.image_tag) and "/" not in self.image_tag and ":" not in self.image_tag,
             f"image_tag {self.image_tag!r}: must be a plain tag such as latest or 0.1.0")
        need(self.image is None or is_image_reference(self.image),
             f"image {self.image!r}: not an image reference; expected [REGISTRY[:PORT]/]PATH[:TAG][@DIGEST] "
             "with a lowercase path, e.g. registry.example/aiperf/all:0.1.0")
        need(self.total_workers >= 1, f"total_workers {self.total_workers}: must be at least 1")
        need(1 <= self.workers_per_pod <= MAX_PER_POD,
             f"workers_per_pod {self.workers_per_pod}: must be 1-{MAX_PER_POD}")
        need(self.record_processors_per_pod is None or 1 <= self.record_processors_per_pod <= MAX_PER_POD,
             f"record_processors_per_pod {self.record_processors_per_pod}: must be 1-{MAX_PER_POD}")
        need(self.ttl_seconds >= 0, f"ttl_seconds {self.ttl_seconds}: must not be negative")
        for key in self.resources:
            need(key in set(ServiceType), f"resources {key!r}: not a service type "
                 f"(one of {', '.join(ServiceType)})")
        need(self.service_account is None or is_dns1123_subdomain(self.service_account),
             f"service_account {self.service_account!r}: must be a DNS-1123 name")
        for secret in self.image_pull_secrets:
            need(is_dns1123_subdomain(secret), f"image_pull_secrets {secret!r}: must be a DNS-1123 name")
        for key in (NAME_LABEL, INSTANCE_LABEL, COMPONENT_LABEL):
            need(key not in self.labels, f"labels {key}: set by aiperf, leave it out")
        problems += self._env_problems()
        problems += self._pod_problems()
        if not problems:
            problems += self._length_problems()
        return problems

    def _env_problems(self) -> list[str]:
        problems: list[str] = []
        for env in [*self.env_vars, *self.env_from_secrets]:
            if not is_env_name(env):
                problems.append(f"environment variable {env!r}: not a valid name")
            elif env in RESERVED_ENV:
                problems.append(f"environment variable {env}: set by aiperf, leave it out")
        for env in self.env_vars:
            if env in SECRET_ENV_VARS:
                flag = "api_key_secret" if env == API_KEY_ENV else "headers_secret"
                problems.append(f"env_vars {env}: a secret never goes in the manifests as a value; "
                                f"put it in a Secret and pass {flag} SECRET/KEY")
        for env, ref in ((API_KEY_ENV, self.api_key_secret), (HEADERS_ENV, self.headers_secret)):
            given = {self.env_from_secrets[n] for n in _ENDPOINT_ENV[env] if n in self.env_from_secrets}
            given |= {ref} if ref else set()
            if len(given) > 1:
                problems.append(f"{env}: given as {', '.join(map(repr, sorted(given)))}; keep one")
        try:
            self.plain_secret_env()
            self.endpoint_secret_env()
        except KubeConfigError as exc:
            problems.append(str(exc))
        return problems

    def _pod_problems(self) -> list[str]:
        problems = [f"volumes {v.get('name')!r}: the name of one of aiperf's own volumes, choose another"
                    for v in self.pod.volumes if v.get("name") in RESERVED_VOLUMES]
        for mount in self.pod.volume_mounts:
            path = str(mount.get("mountPath", ""))
            if any(path == p or path.startswith(p + "/") for p in RESERVED_MOUNT_PATHS):
                problems.append(f"volumeMounts {mount.get('name')!r}: {path} is where aiperf mounts its own "
                                f"volumes ({', '.join(RESERVED_MOUNT_PATHS)}), choose another path")
        return problems

    def _length_problems(self) -> list[str]:
        # JobSet's own admission check: the longest generated pod name must be a DNS-1035 label.
        layout = self.layout
        jobs = [(CONTROLLER_JOB, 1), (WORKERS_JOB, layout.full_pods)]
        if layout.last_pod_workers is not None:
            jobs.append((WORKERS_LAST_JOB, 1))
        longest = max((pod_hostname(self.name, job, replicas - 1) + POD_NAME_SUFFIX
                       for job, replicas in jobs), key=len)
        if len(longest) > 63:
            return [f"name {self.name!r}: too long, pod name {longest} would exceed 63 characters; "
                    f"use at most {len(self.name) - (len(longest) - 63)} characters"]
        return []
