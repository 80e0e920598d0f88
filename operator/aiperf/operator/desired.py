"""What one AIPerfJob should own, computed from its body alone (pure: no API calls).

    plan = plan_job(body, defaults=Defaults())          # raises InvalidSpec for a bad CR
    plan.objects    # ServiceAccount?, Role, RoleBinding, Secret, ConfigMap, JobSet, in creation order

`spec.benchmark` is read with the benchmark model (`aiperf.crd.model.decode_spec`: AIPerf's
shapes, `variables`), the deployment envelope is mapped onto `KubeSettings`, and the objects come
from the same builders direct mode uses (`aiperf.kube`). Every object carries a controller owner reference to the CR
(name and UID), which is what makes it the CR's: garbage collection deletes it with the CR, and
the reconciler adopts an existing object only when that reference matches. The CURVE key
Secret is planned without data, as `kube generate` prints it; the reconciler fills it with a
fresh key pair just before creating it (`with_curve_keys`), so keys never appear in a plan.

Mapping of the envelope (AIPerf's): `image` is every container's image (else the operator's
`Defaults`), `imagePullPolicy` every container's; `benchmark.runtime.workersPerPod` and
`recordProcessorsPerPod` as named, `benchmark.logging.level` the services' log level (default
info), `ttlSecondsAfterFinished` as named; `keepFailedPods` leaves the JobSet without a TTL;
`benchmark.runtime.workers` is the total worker count, else AIPerf's rule (`AIPerfJobSpec.total_workers`); `podTemplate`
fields go to the pods (`serviceAccountName` unset: a ServiceAccount `aiperf-<name>` is created
for the run; volumes, mounts, affinity, security contexts, init containers as written); its
`env` entries `AIPERF_INJECTED_API_KEY` (or `OPENAI_API_KEY`) and `AIPERF_INJECTED_HEADERS`
name the endpoint's Secrets, given to the workers only; `resourceMode: burstable` drops the
default limits, `none` sets no resources at all.

Every container of the controller pod also gets the CR's name, namespace and UID
(`aiperf.kuberun.status_push.JobRef.env`): the run's controller pushes its part of the status to
that CR, and only while it has that UID. Direct mode has no CR and sets none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from aiperf.config import CommsOptions, ConfigError, RunConfig, RuntimeOptions
from aiperf.crd.model import (
    API_GROUP,
    API_KEY_ENV_NAMES,
    API_VERSION,
    HEADERS_ENV_NAME,
    JOB_KIND,
    AIPerfJobSpec,
    AIPerfSweepSpec,
    PodTemplate,
    ResourceMode,
    decode_spec,
)
from aiperf.kube import DEFAULT_RESOURCES, ContainerResources, KubeConfigError, KubeSettings, build_all
from aiperf.kube.names import CONTROLLER_JOB
from aiperf.kube.settings import PodOverrides
from aiperf.kubeapi import Obj
from aiperf.kuberun.status_push import JobRef

CR_API_VERSION = f"{API_GROUP}/{API_VERSION}"


class InvalidSpec(ValueError):
    """The CR can never run as written; the message is one line for `kubectl describe`."""


@dataclass(frozen=True, kw_only=True)
class Defaults:
    """The operator's defaults for what a CR leaves out (its command-line flags)."""

    image_registry: str = "localhost"
    image_tag: str = "latest"
    ttl_seconds: int = 300
    results_service: str | None = None
    """`<namespace>/<service>:<port>` of the operator's results server: the sweep-controller's
    fallback for a child whose results sidecar is gone (None: no fallback)."""


@dataclass(frozen=True, kw_only=True)
class JobPlan:
    """The decoded spec, the deployment settings and the objects to create, in order."""

    spec: AIPerfJobSpec
    settings: KubeSettings
    objects: list[Obj]


def owner_reference(body: Mapping[str, Any], kind: str = JOB_KIND) -> Obj:
    """The controller owner reference to the CR `body` of `kind` (apiVersion, kind, name, uid)."""
    meta = body["metadata"]
    return {"apiVersion": CR_API_VERSION, "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def decode_as(spec: Any, kind: str) -> AIPerfJobSpec | AIPerfSweepSpec:
    """The decoded spec of a CR of `kind`; raises `InvalidSpec` naming the field and the problem."""
    try:
        return decode_spec(spec, kind)
    except ConfigError as exc:
        raise InvalidSpec(str(exc)) from None


def decode(spec: Any) -> AIPerfJobSpec:
    """The decoded AIPerfJob spec; raises `InvalidSpec` naming the field and the problem."""
    decoded = decode_as(spec, JOB_KIND)
    assert isinstance(decoded, AIPerfJobSpec)
    return decoded


def _resources(spec: AIPerfJobSpec) -> dict[str, ContainerResources]:
    out: dict[str, ContainerResources] = {}
    mode = spec.envelope.resource_mode
    if mode is ResourceMode.BURSTABLE:
        out = {str(svc): ContainerResources(requests=dict(r.requests)) for svc, r in DEFAULT_RESOURCES.items()}
    elif mode is ResourceMode.NONE:
        out = {str(svc): ContainerResources() for svc in DEFAULT_RESOURCES}
    template = spec.pod_template
    for svc, req in (template.resources if template else {}).items():
        out[str(svc)] = ContainerResources(requests=dict(req.requests), limits=dict(req.limits))
    return out


_ENDPOINT_SECRET_ENV = frozenset({*API_KEY_ENV_NAMES, HEADERS_ENV_NAME})


def _pod_overrides(template: PodTemplate | None) -> PodOverrides:
    if template is None:
        return PodOverrides()
    wire = msgspec.to_builtins(template)
    names = {f.name: f.encode_name for f in msgspec.structs.fields(PodTemplate)}
    return PodOverrides(**{f.name: wire[names[f.name]] for f in msgspec.structs.fields(PodOverrides)
                           if names[f.name] in wire})


def settings_for(name: str, namespace: str, spec: AIPerfJobSpec, defaults: Defaults) -> KubeSettings:
    """The deployment settings of the run (see the module doc); raises `InvalidSpec`."""
    envelope, t = spec.envelope, spec.pod_template
    env = [e for e in (t.env if t else []) if e.name not in _ENDPOINT_SECRET_ENV]
    env_vars = {e.name: e.value for e in env if e.value is not None}
    env_secrets = {e.name: f"{e.value_from.secret_key_ref.name}/{e.value_from.secret_key_ref.key}"
                   for e in env if e.value_from is not None}
    api_key, headers = spec.api_key_secret, spec.headers_secret
    options: dict[str, Any] = {
        "name": name, "namespace": namespace, "image_registry": defaults.image_registry,
        "image_tag": defaults.image_tag, "image": envelope.image,
        "total_workers": spec.total_workers(), "workers_per_pod": spec.workers_per_pod,
        "record_processors_per_pod": spec.benchmark.runtime.record_processors_per_pod,
        "resources": _resources(spec), "env_vars": env_vars, "env_from_secrets": env_secrets,
        "ttl_seconds": defaults.ttl_seconds if envelope.ttl_seconds_after_finished is None
        else envelope.ttl_seconds_after_finished,
        "service_account": t.service_account_name if t else None,  # None: the run's own (build_all)
        "api_key_secret": f"{api_key.name}/{api_key.key}" if api_key else None,
        "headers_secret": f"{headers.name}/{headers.key}" if headers else None,
        "keep_failed_pods": envelope.keep_failed_pods, "pod": _pod_overrides(t),
    }
    if envelope.image_pull_policy is not None:
        options["image_pull_policy"] = envelope.image_pull_policy
    if t is not None:
        options.update(node_selector=dict(t.node_selector), labels=dict(t.labels),
                       annotations=dict(t.annotations), image_pull_secrets=[s.name for s in t.image_pull_secrets],
                       tolerations=[msgspec.to_builtins(x) for x in t.tolerations])
    try:
        return KubeSettings(**options)
    except KubeConfigError as exc:
        raise InvalidSpec(str(exc)) from None


def run_config_for(name: str, spec: AIPerfJobSpec) -> RunConfig:
    """The run's configuration (the ConfigMap adapts it to the cluster)."""
    return RunConfig(run_id=name, mode="profile", artifact_dir="artifacts", comms=CommsOptions(ipc_dir="/aiperf/ipc"),
                     benchmark=spec.benchmark,
                     runtime=RuntimeOptions(log_level=spec.benchmark.logging.level or "info"))


def plan_job(body: Mapping[str, Any], *, defaults: Defaults) -> JobPlan:
    """The plan of the AIPerfJob `body` (metadata.name, namespace and uid set). Raises
    `InvalidSpec` (one line) when the spec does not decode or cannot be deployed."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = decode(body.get("spec") or {})
    settings = settings_for(name, namespace, spec, defaults)
    try:
        objects = build_all(settings, run_config_for(name, spec))
    except KubeConfigError as exc:
        raise InvalidSpec(str(exc)) from None
    owner = owner_reference(body)
    ref = JobRef(name=name, namespace=namespace, uid=meta["uid"])
    for obj in objects:
        obj["metadata"]["ownerReferences"] = [dict(owner)]
        if obj["kind"] != "JobSet":
            continue
        for job in obj["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            if job["name"] == CONTROLLER_JOB:
                for container in pod["containers"]:
                    container["env"] = [*container.get("env", []), *ref.env()]
    return JobPlan(spec=spec, settings=settings, objects=objects)
