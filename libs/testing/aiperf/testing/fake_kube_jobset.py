"""JobSet's admission webhooks, as the JobSet controller manager serves them to kube-apiserver
(kubernetes-sigs/jobset, pkg/webhooks/jobset_webhook.go), for the fake's store.

Mutating (`mjobset.kb.io`, create and update), before the schema and validation:
- `spec.successPolicy` defaults to `{operator: All}`, `spec.startupPolicy` to
  `{startupPolicyOrder: AnyOrder}`;
- every replicated job's Job template gets `completionMode: Indexed`, its pod template
  `restartPolicy: OnFailure`, when unset;
- `spec.network.enableDNSHostnames` and `publishNotReadyAddresses` default to true;
- failure policy rules without a name are named `failurePolicyRule<i>`.

Validating (`vjobset.kb.io`), after the schema; a refusal is 422 Invalid with the apiserver's
`admission webhook "vjobset.kb.io" denied the request: ` prefix:
- create: the longest Job name `<jobset>-<replicatedJob>-<replicas-1>` and, for an Indexed job
  with `completions`, the longest pod name `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-abcde`
  (the 5 characters stand for the Job controller's random suffix) must be DNS-1035 labels, at
  most 63 characters; a group name and `spec.network.subdomain` likewise; `dependsOn` on the
  first replicated job; replicated job names in the failure/success policies and the
  coordinator must exist;
- update: `spec.replicatedJobs` and `spec.managedBy` are immutable, except the pod template's
  labels, annotations, nodeSelector, tolerations and schedulingGates while the JobSet is or
  becomes suspended (what Kueue changes).

Not modelled: the feature-gated rules (InPlaceRestart, RestartJob, ElasticJobSet), volume
claim policies, the JobSet pod webhook (exclusive placement), failure policy rule name syntax.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from aiperf.testing.fake_kube_api import ApiError, FieldError, KindInfo, Obj

GROUP = "jobset.x-k8s.io"
VALIDATING = "vjobset.kb.io"
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_TOO_LONG = "must be no more than 63 characters"
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
JOB_NAME_TOO_LONG = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
POD_NAME_TOO_LONG = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
_GROUP_TOO_LONG = ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
_SUBDOMAIN_TOO_LONG = ".spec.network.subdomain is too long, must be less than 63 characters"
_KUEUE_MUTABLE = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"),
                  ("spec", "tolerations"), ("spec", "schedulingGates"))


class JobSetWebhooks:
    """The JobSet webhooks as a store admission hook (`fake_kube_store.Store.webhooks`)."""

    def applies(self, info: KindInfo) -> bool:
        """True for JobSets (every served version)."""
        return info.group == GROUP and info.kind == "JobSet"

    def mutate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        """JobSet's defaulting webhook, in place (see the module doc)."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("successPolicy", {"operator": "All"})
        spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
        for rjob in spec.get("replicatedJobs") or []:
            job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
            job_spec.setdefault("completionMode", "Indexed")
            pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
            if not pod_spec.get("restartPolicy"):
                pod_spec["restartPolicy"] = "OnFailure"
        network = spec.setdefault("network", {})
        network.setdefault("enableDNSHostnames", True)
        network.setdefault("publishNotReadyAddresses", True)
        for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
            if not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"

    def validate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        """JobSet's validating webhook: raise 422 naming every problem (see the module doc)."""
        errors = create_errors(obj) if old is None else update_errors(old, obj)
        if errors:
            denied = ApiError.invalid_fields(info, obj["metadata"].get("name", ""), errors)
            denied.message = f'admission webhook "{VALIDATING}" denied the request: {denied.message}'
            raise denied


def _dns1035(value: str, path: str, too_long: str, shown: str | None = None) -> list[FieldError]:
    errors = []
    if len(value) > 63:
        errors.append(FieldError("Invalid", path, too_long, shown if shown is not None else value))
    if not _DNS1035.match(value):
        errors.append(FieldError("Invalid", path, _DNS1035_MSG, shown if shown is not None else value))
    return errors


def longest_pod_name(jobset: str, rjob: Obj) -> str | None:
    """The longest pod name JobSet's webhook checks for replicated job `rjob` of JobSet
    `jobset`, None when it checks none (not Indexed, or no `completions`)."""
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") != "Indexed" or completions is None:
        return None
    return f"{jobset}-{rjob.get('name', '')}-{int(rjob.get('replicas', 1)) - 1}-{int(completions) - 1}-abcde"


def create_errors(obj: Obj) -> list[FieldError]:
    """What `ValidateCreate` refuses in JobSet `obj` (defaults applied)."""
    name = obj["metadata"].get("name") or obj["metadata"].get("generateName", "") + "xxxxx"
    spec = obj.get("spec") or {}
    rjobs = spec.get("replicatedJobs") or []
    errors: list[FieldError] = []
    if rjobs and rjobs[0].get("dependsOn"):
        errors.append(FieldError("InternalError", "<nil>", "DependsOn can't be set for the first ReplicatedJob"))
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain:
        errors += _dns1035(subdomain, "spec.network.subdomain", _SUBDOMAIN_TOO_LONG)
    names = [str(r.get("name", "")) for r in rjobs]
    for i, rjob in enumerate(rjobs):
        path = f"spec.replicatedJobs[{i}]"
        if rjob.get("groupName") is not None:
            errors += _dns1035(str(rjob["groupName"]), f"{path}.groupName", _GROUP_TOO_LONG)
        job_name = f"{name}-{rjob.get('name', '')}-{int(rjob.get('replicas', 1)) - 1}"
        errors += _dns1035(job_name, f"{path}.name", JOB_NAME_TOO_LONG)
        pod_name = longest_pod_name(name, rjob)
        if pod_name is not None:
            errors += _dns1035(pod_name, f"{path}.name", POD_NAME_TOO_LONG, shown=job_name)
        for dep in rjob.get("dependsOn") or []:
            if dep.get("name") not in names[:i]:
                errors.append(FieldError("InternalError", "<nil>", f"replicatedJob: {rjob.get('name')} cannot depend "
                                         f"on replicatedJob: {dep.get('name')}"))
    targets = [*((spec.get("successPolicy") or {}).get("targetReplicatedJobs") or [])]
    for rule in (spec.get("failurePolicy") or {}).get("rules") or []:
        targets += rule.get("targetReplicatedJobs") or []
    for target in targets:
        if target not in names:
            errors.append(FieldError("InternalError", "<nil>", f"invalid replicatedJob name '{target}' does not "
                                     "appear in .spec.ReplicatedJobs"))
    coordinator = spec.get("coordinator")
    if coordinator and coordinator.get("replicatedJob") not in names:
        errors.append(FieldError("InternalError", "<nil>",
                                 f"coordinator replicatedJob {coordinator.get('replicatedJob')} does not exist"))
    return errors


def _kueue_masked(rjobs: list[Obj], like: list[Obj]) -> list[Obj]:
    """`rjobs` with the fields Kueue may change while suspended taken from `like` (by name)."""
    by_name = {r.get("name"): r for r in like}
    out = copy.deepcopy(rjobs)
    for rjob in out:
        source = by_name.get(rjob.get("name"))
        if source is None:
            continue
        pod = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        old_pod = ((source.get("template") or {}).get("spec") or {}).get("template") or {}
        for part, key in _KUEUE_MUTABLE:
            value = (old_pod.get(part) or {}).get(key)
            section = pod.setdefault(part, {})
            if value is None:
                section.pop(key, None)
            else:
                section[key] = copy.deepcopy(value)
    return out


def update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """What `ValidateUpdate` refuses (ElasticJobSet off)."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    new_rjobs: list[Any] = new_spec.get("replicatedJobs") or []
    old_rjobs: list[Any] = old_spec.get("replicatedJobs") or []
    if old_spec.get("suspend") or new_spec.get("suspend"):
        new_rjobs, old_rjobs = _kueue_masked(new_rjobs, old_rjobs), _kueue_masked(old_rjobs, old_rjobs)
    errors = []
    if new_rjobs != old_rjobs:
        errors.append(FieldError("Invalid", "spec.replicatedJobs", "field is immutable", new_spec.get("replicatedJobs")))
    if new_spec.get("managedBy") != old_spec.get("managedBy"):
        errors.append(FieldError("Invalid", "spec.managedBy", "field is immutable", new_spec.get("managedBy")))
    return errors
