"""The controllers between a JobSet and its pods, and the pod admission plugins they meet, for
the fake (`FakeKube(jobs=True)`), and the JobSet controller's TTL (`FakeKube.expire_jobsets()`:
`JobSetTtl` deletes a finished JobSet, Foreground, `ttlSecondsAfterFinished` after its Completed
or Failed condition's transition time; the test says when, so no timer runs).

`JobLayer.run()` (after every write, with the garbage collector) plays:
- the JobSet controller: each JobSet that is not suspended, finished or being deleted gets its
  Jobs `<jobset>-<replicatedJob>-<jobIndex>` (labels `jobset.sigs.k8s.io/*`, controller owner
  reference to the JobSet);
- the Job controller: each Indexed Job gets, per completion index without a pod, a pod
  `<job>-<index>-<5 random>` from its template, created through admission like any API write.
  A refused create records a Warning Event `FailedCreate` on the Job, `Error creating: <the
  API's message>` (one per distinct message; the pod is tried again after every later write,
  as the real controller retries with backoff).

`PodAdmission` (a store webhook on Pod creates) plays kube-apiserver's plugins:
- PodSecurity: the namespace label `pod-security.kubernetes.io/enforce` (`baseline` or
  `restricted`) refuses pods that violate the level, with the real `violates PodSecurity
  "restricted:latest": ...` text (privileged, host namespaces and ports, hostPath; for
  restricted also allowPrivilegeEscalation, capabilities drop ALL, runAsNonRoot, runAsUser 0,
  seccompProfile, volume types);
- ServiceAccount: the pod's `serviceAccountName` must exist in its namespace;
- ResourceQuota: the namespace's quotas (`pods`, `requests.cpu`, `requests.memory`,
  `limits.cpu`, `limits.memory`) must still hold with the new pod, and a quota on a compute
  resource needs the pod to state it.

Not modelled: Job backoff timing, pod failure and replacement (the kubelet helpers do that),
the Pod Security `warn`/`audit` modes and version labels, exemptions, LimitRanger defaults,
quota scopes and object-count quotas other than pods, JobSet's startup policy and restarts.
"""

from __future__ import annotations

import copy
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj, WriteOptions
from aiperf.testing.fake_kube_kinds import BUILTIN_KINDS, NAMESPACES, PODS
from aiperf.testing.fake_kube_store import Store, now_rfc3339, parse_time

JOBS = next(k for k in BUILTIN_KINDS if k.kind == "Job")
EVENTS = next(k for k in BUILTIN_KINDS if k.kind == "Event" and k.group == "")
SERVICE_ACCOUNTS = next(k for k in BUILTIN_KINDS if k.kind == "ServiceAccount")
RESOURCE_QUOTAS = next(k for k in BUILTIN_KINDS if k.kind == "ResourceQuota")
JOBSET_GROUP = "jobset.x-k8s.io"
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
JOBSET_NAME, REPLICATED_JOB, JOBSET_UID = ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                           "jobset.sigs.k8s.io/jobset-uid")
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_RESTRICTED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret")
_QUOTA_KEYS = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory")


# -- PodSecurity ------------------------------------------------------------------------------------

def _containers(spec: Obj) -> list[Obj]:
    return [c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or []
            if isinstance(c, dict)]


def _names(containers: list[Obj]) -> str:
    names = [f'"{c.get("name")}"' for c in containers]
    return f"container{'s' if len(names) > 1 else ''} {', '.join(names)}"


def baseline_violations(spec: Obj) -> list[str]:
    """What the `baseline` level forbids in pod spec `spec`, worded like the PodSecurity plugin."""
    out = []
    host = [f"{k}={str(spec[k]).lower()}" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if host:
        out.append(f"host namespaces ({', '.join(host)})")
    privileged = [c for c in _containers(spec) if (c.get("securityContext") or {}).get("privileged")]
    if privileged:
        out.append(f"privileged ({_names(privileged)} must not set securityContext.privileged=true)")
    host_path = [v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict) and "hostPath" in v]
    if host_path:
        out.append(f"hostPath volumes (volume{'s' if len(host_path) > 1 else ''} "
                   f"{', '.join(f'{n!r}'.replace(chr(39), chr(34)) for n in host_path)})")
    ports = [c for c in _containers(spec) if any((p or {}).get("hostPort") for p in c.get("ports") or [])]
    if ports:
        out.append(f"hostPort ({_names(ports)} uses hostPorts)")
    return out


def restricted_violations(spec: Obj) -> list[str]:
    """What the `restricted` level forbids beyond `baseline` (its messages, in its order)."""
    out = baseline_violations(spec)
    pod_sc = spec.get("securityContext") or {}
    containers = _containers(spec)

    def sc(c: Obj) -> Obj:
        return c.get("securityContext") or {}

    escalating = [c for c in containers if sc(c).get("allowPrivilegeEscalation") is not False]
    if escalating:
        out.append(f"allowPrivilegeEscalation != false ({_names(escalating)} must set "
                   "securityContext.allowPrivilegeEscalation=false)")
    undropped = [c for c in containers if "ALL" not in ((sc(c).get("capabilities") or {}).get("drop") or [])]
    if undropped:
        out.append(f'unrestricted capabilities ({_names(undropped)} must set securityContext.capabilities.drop=["ALL"])')
    bad_volumes = [v.get("name") for v in spec.get("volumes") or []
                   if isinstance(v, dict) and not any(t in v for t in _RESTRICTED_VOLUMES) and "hostPath" not in v]
    if bad_volumes:
        out.append(f"restricted volume types (volumes {', '.join(map(str, bad_volumes))})")
    root_ok = pod_sc.get("runAsNonRoot") is True
    not_non_root = [c for c in containers if sc(c).get("runAsNonRoot") is False or (
        not root_ok and sc(c).get("runAsNonRoot") is not True)]
    if not_non_root:
        out.append(f"runAsNonRoot != true (pod or {_names(not_non_root)} must set securityContext.runAsNonRoot=true)")
    root = [c for c in containers if sc(c).get("runAsUser") == 0]
    if pod_sc.get("runAsUser") == 0 or root:
        out.append("runAsUser=0 (pod must not set runAsUser=0)" if pod_sc.get("runAsUser") == 0 else
                   f"runAsUser=0 ({_names(root)} must not set runAsUser=0)")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    no_seccomp = [c for c in containers if (sc(c).get("seccompProfile") or {}).get("type") == "Unconfined" or (
        not pod_seccomp and (sc(c).get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"))]
    if no_seccomp:
        out.append(f'seccompProfile (pod or {_names(no_seccomp)} must set securityContext.seccompProfile.type to '
                   '"RuntimeDefault" or "Localhost")')
    return out


# -- ResourceQuota ----------------------------------------------------------------------------------

_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "m": 1e-3, "": 1}


def quantity(text: Any) -> float:
    """A Kubernetes quantity (`500m`, `2Gi`, `1.5`) as a number."""
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text).strip())
    if match is None or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _pod_usage(spec: Obj) -> dict[str, float]:
    usage = {"pods": 1.0}
    for key in _QUOTA_KEYS:
        kind, resource = key.split(".")
        usage[key] = sum(quantity(((c.get("resources") or {}).get(kind) or {}).get(resource, 0))
                         for c in spec.get("containers") or [] if isinstance(c, dict))
    return usage


class PodAdmission:
    """PodSecurity, ServiceAccount and ResourceQuota on Pod creates (see the module doc)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def applies(self, info: KindInfo) -> bool:
        return info.group == "" and info.kind == "Pod"

    def mutate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        return None

    def validate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        if old is not None:
            return
        meta, spec = obj["metadata"], obj.get("spec") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        namespace = self._store.find(NAMESPACES, "", ns) or {}
        level = ((namespace.get("metadata") or {}).get("labels") or {}).get(ENFORCE_LABEL)
        violations = (restricted_violations(spec) if level == "restricted"
                      else baseline_violations(spec) if level == "baseline" else [])
        if violations:
            raise ApiError.forbidden(info, name, f'violates PodSecurity "{level}:latest": {", ".join(violations)}')
        account = spec.get("serviceAccountName") or "default"
        if self._store.find(SERVICE_ACCOUNTS, ns, account) is None:
            raise ApiError.forbidden(info, name, f"error looking up service account {ns}/{account}: serviceaccount "
                                     f'"{account}" not found')
        self._check_quotas(info, ns, name, spec)

    def _check_quotas(self, info: KindInfo, ns: str, name: str, spec: Obj) -> None:
        quotas = [o for key, o in self._store.raw_items() if key[:3] == ("", "resourcequotas", ns)]
        if not quotas:
            return
        requested = _pod_usage(spec)
        pods = [o for key, o in self._store.raw_items() if key[:3] == ("", "pods", ns)
                and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            hard = {k: quantity(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()
                    if k == "pods" or k in _QUOTA_KEYS}
            missing = [k for k in hard if k != "pods" and not requested.get(k)]
            if missing:
                unnamed = ",".join(str(c.get("name")) for c in spec.get("containers") or [])
                raise ApiError.forbidden(info, name, f"failed quota: {quota['metadata']['name']}: must specify "
                                         f"{','.join(sorted(missing))} for: {unnamed}")
            used = {k: sum(_pod_usage(p.get("spec") or {})[k] for p in pods) for k in hard}
            over = sorted(k for k in hard if used[k] + requested[k] > hard[k])
            if over:
                raw = (quota.get("spec") or {}).get("hard") or {}
                raise ApiError.forbidden(info, name, f"exceeded quota: {quota['metadata']['name']}, requested: "
                                         + ",".join(f"{k}={_fmt(requested[k])}" for k in over) + ", used: "
                                         + ",".join(f"{k}={_fmt(used[k])}" for k in over) + ", limited: "
                                         + ",".join(f"{k}={raw[k]}" for k in over))


def _unnamed(message: str) -> str:
    return re.sub(r'(pods|jobs\.batch) "[^"]*"', r'\1 ""', message)


def _fmt(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


# -- the JobSet and Job controllers -----------------------------------------------------------------

def controller_reference(owner: Obj) -> Obj:
    """The owner reference a controller puts on what it creates for `owner` (a JobSet's Jobs, a
    Job's pods): `controller` and `blockOwnerDeletion` set, as the JobSet and Job controllers do."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


class JobLayer:
    """The JobSet and Job controllers over `store` (see the module doc)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def run(self) -> int:
        """One pass: Jobs for JobSets, pods for Jobs; the number of objects or Events written."""
        actions = 0
        for key, jobset in list(self._store.raw_items()):
            if key[:2] == (JOBSET_GROUP, "jobsets") and self._active(jobset):
                actions += self._ensure_jobs(jobset)
        for key, job in list(self._store.raw_items()):
            if key[:2] == ("batch", "jobs") and not job["metadata"].get("deletionTimestamp") and \
                    not (job.get("spec") or {}).get("suspend"):
                actions += self._ensure_pods(job)
        return actions

    @staticmethod
    def _active(jobset: Obj) -> bool:
        status = jobset.get("status") or {}
        return not (jobset["metadata"].get("deletionTimestamp") or (jobset.get("spec") or {}).get("suspend")
                    or status.get("terminalState"))

    def _ensure_jobs(self, jobset: Obj) -> int:
        meta = jobset["metadata"]
        ns, created = meta["namespace"], 0
        for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
            for index in range(int(rjob.get("replicas", 1))):
                name = f"{meta['name']}-{rjob['name']}-{index}"
                if self._store.find(JOBS, ns, name) is not None:
                    continue
                template = copy.deepcopy(rjob.get("template") or {})
                labels = {JOBSET_NAME: meta["name"], REPLICATED_JOB: rjob["name"], JOBSET_UID: meta["uid"],
                          JOB_INDEX: str(index)}
                pod_meta = template.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
                pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
                job = {"apiVersion": "batch/v1", "kind": "Job", "spec": template["spec"], "metadata": {
                    "name": name, "namespace": ns, "labels": {**(template.get("metadata") or {}).get("labels", {}),
                                                              **labels},
                    "ownerReferences": [controller_reference(jobset)]}}
                created += self._create(JOBS, job, owner=jobset, kind="JobSet", reason="FailedCreateJob")
        return created

    def _ensure_pods(self, job: Obj) -> int:
        meta, spec = job["metadata"], job.get("spec") or {}
        ns, created = meta["namespace"], 0
        pods = [o for key, o in self._store.raw_items() if key[:3] == ("", "pods", ns)
                and any(r.get("uid") == meta["uid"] for r in o["metadata"].get("ownerReferences") or [])]
        have = {(p["metadata"].get("labels") or {}).get(COMPLETION_INDEX) for p in pods}
        for index in range(int(spec.get("completions") or 1)):
            if str(index) in have:
                continue
            template = copy.deepcopy(spec.get("template") or {})
            pod_meta = template.get("metadata") or {}
            pod = {"apiVersion": "v1", "kind": "Pod", "spec": template.get("spec") or {}, "metadata": {
                "name": f"{meta['name']}-{index}-{uuid.uuid4().hex[:5]}", "namespace": ns,
                "labels": {**(pod_meta.get("labels") or {}), COMPLETION_INDEX: str(index)},
                "annotations": {**(pod_meta.get("annotations") or {}), COMPLETION_INDEX: str(index)},
                "ownerReferences": [controller_reference(job)]}}
            created += self._create(PODS, pod, owner=job, kind="Job", reason="FailedCreate")
        return created

    def _create(self, info: KindInfo, obj: Obj, *, owner: Obj, kind: str, reason: str) -> int:
        """Create `obj` through admission, or record its refusal (`_failed`); 1 when it or a new
        refusal Event was written (a change), else 0."""
        try:
            self._store.create(info, obj["metadata"]["namespace"], obj)
            return 1
        except ApiError as exc:
            return self._failed(owner, kind, reason, exc)

    def _failed(self, owner: Obj, kind: str, reason: str, exc: ApiError) -> int:
        """Record the refusal as a Warning Event on `owner`, once per distinct message (the
        generated pod name aside)."""
        meta = owner["metadata"]
        message = f"Error creating: {exc.message}"
        for key, event in self._store.raw_items():
            if key[:3] == ("", "events", meta["namespace"]) and event.get("reason") == reason and \
                    (event.get("involvedObject") or {}).get("uid") == meta["uid"] and \
                    _unnamed(str(event.get("message"))) == _unnamed(message):
                return 0
        stamp = now_rfc3339()
        self._store.create(EVENTS, meta["namespace"], {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": owner["apiVersion"], "kind": kind, "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"]},
            "type": "Warning", "reason": reason, "message": message, "source": {"component": "job-controller"},
            "reportingComponent": "job-controller", "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1})
        return 1


# -- JobSet TTL ---------------------------------------------------------------------------------------

def _finished_at(jobset: Obj) -> datetime | None:
    """When JobSet `jobset` finished: its True Completed or Failed condition's transition time."""
    for cond in (jobset.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Completed", "Failed") and cond.get("status") == "True":
            try:
                return parse_time(str(cond.get("lastTransitionTime")))
            except ValueError:
                return datetime.now(UTC)
    return None


class JobSetTtl:
    """The JobSet controller's `ttlSecondsAfterFinished`: a finished JobSet (Completed or Failed
    condition) is deleted, Foreground, that many seconds after it finished."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _due(self) -> list[tuple[Obj, float]]:
        out = []
        for key, jobset in self._store.raw_items():
            ttl = (jobset.get("spec") or {}).get("ttlSecondsAfterFinished")
            if key[:2] != (JOBSET_GROUP, "jobsets") or ttl is None or jobset["metadata"].get("deletionTimestamp"):
                continue
            finished = _finished_at(jobset)
            if finished is not None:
                out.append((jobset, (finished + timedelta(seconds=int(ttl)) - datetime.now(UTC)).total_seconds()))
        return out

    def run(self) -> int:
        """Delete every JobSet whose TTL has passed; how many."""
        expired = [j for j, wait in self._due() if wait <= 0]
        info = self._store.kinds.by_kind(f"{JOBSET_GROUP}/v1alpha2", "JobSet")
        for jobset in expired:
            assert info is not None
            meta = jobset["metadata"]
            self._store.delete(info, meta["namespace"], meta["name"], {"propagationPolicy": "Foreground"},
                               WriteOptions())
        return len(expired)

    def seconds_to_next_deadline(self) -> float | None:
        """Seconds until the next finished JobSet's TTL passes (None: none pending)."""
        waits = [wait for _, wait in self._due()]
        return max(0.0, min(waits)) if waits else None
