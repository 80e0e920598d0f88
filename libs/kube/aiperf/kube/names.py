"""Kubernetes name rules and the names of one run's objects, hosts and images.

All names derive from the run name `<name>`: JobSet, Role and RoleBinding `aiperf-<name>`,
ConfigMap `aiperf-<name>-config`, headless service (JobSet subdomain) `aiperf-<name>`. JobSet
names pods `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`, so the controller pod's DNS name is
`aiperf-<name>-controller-0-0.aiperf-<name>` (the short form, resolved through the pod's search
domains; it works whatever the cluster domain is).
"""

from __future__ import annotations

import re

from aiperf.messages import ServiceType

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_PORT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# The grammar of github.com/distribution/reference (what the kubelet and the runtimes parse):
# [DOMAIN[:PORT]/]PATH[:TAG][@DIGEST], PATH components lowercase, DOMAIN a hostname or [IPv6].
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*)"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")

PREFIX = "aiperf"
API_GROUP = "aiperf.nvidia.com"
API_VERSION = "v1alpha1"
JOB_KIND, SWEEP_KIND = "AIPerfJob", "AIPerfSweep"
"""The custom resources' API group, version and kinds (`aiperf.crd.model` re-exports them)."""
CONTROLLER_JOB = "controller"
WORKERS_JOB = "workers"
WORKERS_LAST_JOB = "workers-last"
POD_NAME_SUFFIX = "-abcde"
"""Stands for the random suffix the Job controller adds to pod names (JobSet's own length check)."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
"""The labels JobSet puts on its Jobs and pods: the JobSet's name, the replicated job's name, the
UID of the JobSet that made them."""
KEEP_SIDECAR_ANNOTATION = "aiperf.nvidia.com/keep-results-sidecar"
"""On an AIPerfJob, `"true"`: the operator copies the results but leaves the results sidecar
running (the attached `aiperf kube profile`, `kube shutdown` or its linger time retires it)."""
JOB_NAME_ENV, JOB_NAMESPACE_ENV, JOB_UID_ENV = "AIPERF_JOB_NAME", "AIPERF_JOB_NAMESPACE", "AIPERF_JOB_UID"
"""Operator mode: the AIPerfJob the controller pod reports to (`aiperf.kuberun.status_push.JobRef`)."""


def is_dns1123_label(value: str) -> bool:
    """True when `value` is a DNS-1123 label: lowercase alphanumerics and '-', at most 63."""
    return len(value) <= 63 and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1035_label(value: str) -> bool:
    """True when `value` is a DNS-1035 label (a DNS-1123 label that starts with a letter)."""
    return len(value) <= 63 and _DNS1035_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """True when `value` is a DNS-1123 subdomain: dot-separated labels, at most 253 in all."""
    return 0 < len(value) <= 253 and all(_DNS1123_LABEL.fullmatch(part) for part in value.split("."))


def is_port_name(value: str) -> bool:
    """True when `value` is a valid container port name (IANA_SVC_NAME): at most 15 characters,
    lowercase alphanumerics and '-', at least one letter, no '--'."""
    return (len(value) <= 15 and _PORT_NAME.fullmatch(value) is not None
            and "--" not in value and any(c.isalpha() for c in value))


def is_env_name(value: str) -> bool:
    """True when `value` is an acceptable environment variable name."""
    return _ENV_NAME.fullmatch(value) is not None


def is_secret_key(value: str) -> bool:
    """True when `value` is a valid key of a Secret or ConfigMap."""
    return len(value) <= 253 and _SECRET_KEY.fullmatch(value) is not None


def is_image_reference(value: str) -> bool:
    """True when `value` is an image reference a container runtime accepts:
    `[REGISTRY[:PORT]/]PATH[:TAG][@DIGEST]`, e.g. `registry.example:5000/aiperf/all:0.1.0`
    (the repository name at most 255 characters, its path lowercase)."""
    match = _IMAGE_REFERENCE.fullmatch(value)
    return match is not None and len(match["name"]) <= 255


def jobset_name(name: str) -> str:
    """The JobSet (and headless service, Role, RoleBinding) name of run `name`."""
    return f"{PREFIX}-{name}"


def sweep_object_name(name: str) -> str:
    """`aiperf-sweep-<name>`: the ServiceAccount, Role, RoleBinding and JobSet of sweep `name`."""
    return f"{PREFIX}-sweep-{name}"


def longest_pod_name(jobset: str, replicated_job: str, replicas: int = 1, completions: int = 1) -> str:
    """The longest pod name JobSet's validating webhook checks (it must be a DNS-1035 label, at
    most 63 characters): `<jobset>-<replicatedJob>-<replicas-1>-<completions-1>` and the 5
    characters of the Job controller's random suffix (`POD_NAME_SUFFIX`)."""
    return f"{jobset}-{replicated_job}-{replicas - 1}-{completions - 1}{POD_NAME_SUFFIX}"


SWEEP_JOB = "ctl"
"""The replicated job of a sweep's own JobSet (its one pod runs the sweep-controller). Short, so
that the pod name `aiperf-sweep-<name>-ctl-0-0-xxxxx` fits JobSet's 63 characters for every name a
run may have: a 26-character name such as AIPerf's own `scenario-workload-profiles` did not fit
with the container's name here."""


def sweep_name_problem(name: str) -> str | None:
    """Why AIPerfSweep `name` cannot run (its own JobSet's pod name would exceed 63
    characters), one line; None when it fits."""
    longest = longest_pod_name(sweep_object_name(name), SWEEP_JOB)
    if len(longest) <= 63:
        return None
    return (f"name {name!r}: too long, the sweep-controller pod name {longest} would exceed 63 characters "
            f"(JobSet's rule); use at most {len(name) - (len(longest) - 63)} characters")


def curve_secret_name(name: str) -> str:
    """The Secret that holds the CURVE key files of run `name`."""
    return f"{PREFIX}-{name}-curve"


def config_map_name(name: str) -> str:
    """The ConfigMap that holds `run_config.json` of run `name`."""
    return f"{PREFIX}-{name}-config"


def pod_hostname(name: str, job: str, job_index: int, pod_index: int = 0) -> str:
    """The hostname JobSet gives pod `pod_index` of job `job_index` of replicated job `job`."""
    return f"{jobset_name(name)}-{job}-{job_index}-{pod_index}"


def controller_host(name: str) -> str:
    """The controller pod's DNS name as worker pods use it (`AIPERF_CONTROLLER_HOST`)."""
    return f"{pod_hostname(name, CONTROLLER_JOB, 0)}.{jobset_name(name)}"


def image(registry: str, service: ServiceType | str, tag: str) -> str:
    """`<registry>/aiperf/<svc>:<tag>`, or `aiperf/<svc>:<tag>` when `registry` is empty (`svc`:
    a service type or an auxiliary service's name)."""
    path = f"{PREFIX}/{service}:{tag}"
    return f"{registry.rstrip('/')}/{path}" if registry else path
