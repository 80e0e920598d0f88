"""What one AIPerfSweep should own, computed from its body alone (pure: no API calls).

    plan = plan_sweep(body, defaults=Defaults())        # raises InvalidSpec for a bad CR
    plan.objects    # ServiceAccount, Role, RoleBinding, JobSet `aiperf-sweep-<name>`, in creation order

The spec is decoded with the typed model and planned with the planner local sweeps use
(`aiperf.kuberun.sweep_plan.plan_for`); every run's benchmark is built and the deployment
envelope mapped onto `KubeSettings` exactly as each child AIPerfJob will be (under the longest
child name), so a sweep whose children could never run is refused before anything starts; so is
a name whose own JobSet's pod would break JobSet's 63-character rule (`sweep_name_problem`).

The JobSet runs one pod: the `sweep-controller` container (image `<registry>/aiperf/sweep-
controller:<tag>`, or `spec.image`), told which sweep it runs by `AIPERF_SWEEP_NAME`,
`AIPERF_SWEEP_NAMESPACE`, `AIPERF_SWEEP_UID` and `AIPERF_SWEEP_EPOCH` (and, given the operator's
`--results-service`, `AIPERF_RESULTS_SERVICE`: where a gone child sidecar's summary is read from
the operator's copy), and the results sidecar
serving what it writes to the shared emptyDir (the operator harvests the aggregate from there).
A killed pod is replaced (`failurePolicy.maxRestarts`); the new one replans the same runs and
adopts the children already created. Its Role allows exactly what it does: read its own sweep
and patch that sweep's status, update its finalizers (the children's `blockOwnerDeletion`
owner reference needs it where OwnerReferencesPermissionEnforcement runs, as on OpenShift),
create and follow AIPerfJobs, read pods and their results
sidecars through the pod proxy (`SWEEP_RULES`, pinned by a test).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from aiperf.config import ConfigError
from aiperf.config.catalog import SWEEP_CONTROLLER
from aiperf.config.sweep import Plan
from aiperf.crd.model import API_GROUP, SWEEP_KIND, AIPerfJobSpec, AIPerfSweepSpec, JobSpecSchema
from aiperf.kube.config_map import ARTIFACT_DIR
from aiperf.kube.containers import ARTIFACTS_VOLUME, results_container
from aiperf.kube.jobset import JOBSET_API_VERSION, RESTRICTED_POD_SECURITY
from aiperf.kube.names import SWEEP_JOB, image, sweep_name_problem, sweep_object_name
from aiperf.kubeapi import Obj
from aiperf.kuberun.sweep_plan import CHILD_FIELDS, child_name, plan_for, run_benchmark
from aiperf.kuberun.sweeps import RESULTS_SERVICE_ENV
from aiperf.operator.desired import Defaults, InvalidSpec, decode_as, settings_for
from aiperf.operator.desired import owner_reference as job_owner_reference

SWEEP_COMPONENT = SWEEP_CONTAINER = SWEEP_CONTROLLER.name
"""The replicated job (and its pods' `jobset.sigs.k8s.io/replicatedjob-name`), container and component."""
SWEEP_NAME_ENV, SWEEP_NAMESPACE_ENV, SWEEP_UID_ENV, SWEEP_EPOCH_ENV = (
    "AIPERF_SWEEP_NAME", "AIPERF_SWEEP_NAMESPACE", "AIPERF_SWEEP_UID", "AIPERF_SWEEP_EPOCH")
MAX_RESTARTS = 3

SWEEP_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...], bool], ...] = (
    (API_GROUP, ("aiperfsweeps",), ("get", "list", "watch"), True),
    (API_GROUP, ("aiperfsweeps/status",), ("get", "patch"), True),
    (API_GROUP, ("aiperfsweeps/finalizers",), ("update",), True),  # blockOwnerDeletion on its children
    (API_GROUP, ("aiperfjobs",), ("get", "list", "watch", "create", "patch"), False),
    ("", ("pods",), ("get", "list", "watch"), False),
    ("", ("pods/proxy",), ("get", "create"), False),
)
"""(apiGroup, resources, verbs, only the sweep's own object) of the sweep-controller's Role."""


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """The decoded spec, its plan, and the objects to create, in order."""

    spec: AIPerfSweepSpec
    plan: Plan
    objects: list[Obj]


def owner_reference(body: Mapping[str, Any]) -> Obj:
    """The controller owner reference to the AIPerfSweep `body`."""
    return job_owner_reference(body, SWEEP_KIND)


def decode(spec: Any) -> AIPerfSweepSpec:
    """The decoded spec; raises `InvalidSpec` naming the field."""
    decoded = decode_as(spec, SWEEP_KIND)
    assert isinstance(decoded, AIPerfSweepSpec)
    return decoded


def _child_spec(spec: AIPerfSweepSpec) -> AIPerfJobSpec:
    """The deployment envelope every child gets, as an AIPerfJob spec (for `settings_for`)."""
    raw = msgspec.to_builtins(spec.envelope)
    envelope = msgspec.convert({**{k: raw[k] for k in CHILD_FIELDS if k in raw}, "benchmark": {}}, JobSpecSchema)
    return AIPerfJobSpec(envelope=envelope, benchmark=spec.benchmark)


def plan_sweep(body: Mapping[str, Any], *, defaults: Defaults, epoch: str = "") -> SweepPlan:
    """The plan of the AIPerfSweep `body` (metadata.name, namespace and uid set); `epoch` is its
    `status.runEpoch`. Raises `InvalidSpec` (one line) when the spec does not decode, a
    variation is not a valid benchmark, or the children could not be deployed."""
    meta = body["metadata"]
    name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
    spec = decode(body.get("spec") or {})
    try:
        plan = plan_for(spec, uid)
        for run in plan.runs:
            run_benchmark(spec, run)
    except ConfigError as exc:
        raise InvalidSpec(f"spec.sweep: {exc}") from None
    if (problem := sweep_name_problem(name)) is not None:
        raise InvalidSpec(problem)
    child = _child_spec(spec)
    settings = settings_for(name, namespace, child, defaults)  # the children's envelope: refused here
    longest = max((child_name(name, run) for run in plan.runs), key=len, default=name)
    try:
        settings_for(longest, namespace, child, defaults)  # the longest child's pod names
    except InvalidSpec as exc:
        raise InvalidSpec(f"child run {longest}: {exc}") from None
    objects = _objects(body, spec, settings, defaults, epoch)
    return SweepPlan(spec=spec, plan=plan, objects=objects)


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "aiperf", "app.kubernetes.io/instance": name,
            "app.kubernetes.io/component": SWEEP_COMPONENT}


def _meta(body: Mapping[str, Any], name: str) -> Obj:
    return {"name": sweep_object_name(name), "namespace": body["metadata"]["namespace"], "labels": _labels(name),
            "ownerReferences": [owner_reference(body)]}


def _role_rules(name: str) -> list[Obj]:
    rules = []
    for group, resources, verbs, own in SWEEP_RULES:
        rule: Obj = {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}
        if own:
            rule["resourceNames"] = [name]
        rules.append(rule)
    return rules


def sweep_image(spec: AIPerfSweepSpec, defaults: Defaults) -> str:
    """The sweep-controller's image: `spec.image`, else `<registry>/aiperf/sweep-controller:<tag>`."""
    return spec.envelope.image or image(defaults.image_registry, SWEEP_CONTROLLER.name, defaults.image_tag)


def _objects(body: Mapping[str, Any], spec: AIPerfSweepSpec, settings: Any, defaults: Defaults,
             epoch: str) -> list[Obj]:
    meta = body["metadata"]
    name = meta["name"]
    account = sweep_object_name(name)
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(body, name)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(body, name),
            "rules": _role_rules(name)}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta(body, name),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
               "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": meta["namespace"]}]}
    sidecar = results_container(settings)
    args = list(sidecar["args"])
    if "--controller-health-port" in args:  # the end marker alone tells the sweep's end
        at = args.index("--controller-health-port")
        del args[at:at + 2]
    sidecar["args"] = args
    controller = {
        "name": SWEEP_CONTAINER, "image": sweep_image(spec, defaults),
        "imagePullPolicy": settings.image_pull_policy,
        "args": ["--artifact-dir", ARTIFACT_DIR],
        "env": [{"name": SWEEP_NAME_ENV, "value": name}, {"name": SWEEP_NAMESPACE_ENV, "value": meta["namespace"]},
                {"name": SWEEP_UID_ENV, "value": meta["uid"]}, {"name": SWEEP_EPOCH_ENV, "value": epoch},
                *([{"name": RESULTS_SERVICE_ENV, "value": defaults.results_service}] if defaults.results_service
                  else [])],
        "resources": {"requests": dict(SWEEP_CONTROLLER.requests), "limits": dict(SWEEP_CONTROLLER.limits)},
        "volumeMounts": [{"name": ARTIFACTS_VOLUME, "mountPath": ARTIFACT_DIR}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod: Obj = {"restartPolicy": "Never", "serviceAccountName": account, "enableServiceLinks": False,
                "securityContext": dict(RESTRICTED_POD_SECURITY),
                "containers": [controller, sidecar], "volumes": [{"name": ARTIFACTS_VOLUME, "emptyDir": {}}]}
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod["tolerations"] = [dict(t) for t in settings.tolerations]
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
    jobset = {
        "apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": _meta(body, name),
        "spec": {
            "failurePolicy": {"maxRestarts": MAX_RESTARTS},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [SWEEP_JOB]},
            "replicatedJobs": [{"name": SWEEP_JOB, "replicas": 1, "template": {
                "metadata": {"labels": _labels(name)},
                "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
                    "metadata": {"labels": _labels(name)}, "spec": pod}}}}],
        },
    }
    return [sa, role, binding, jobset]


__all__ = ["MAX_RESTARTS", "SWEEP_CONTAINER", "SWEEP_JOB", "SWEEP_RULES", "SweepPlan", "owner_reference",
           "plan_sweep", "sweep_image", "sweep_object_name"]
