"""What keeps a run's pods from starting, from the pod objects alone (pure; no API calls).

`classify(pods, events)` looks at every pod of one run (the pods of its JobSet, listed by label)
and the `FailedCreate` Events of its Jobs (a pod admission refused never exists) and returns the
highest-priority `Blocker`, or None when nothing blocks them (pods still being
created, pulling, running or finished normally). The operator records it in
`status.startupIssue`; `aiperf kube debug` prints it.

Categories, highest priority first (`critical` ones may fail the run once they persist):

| category          | from                                                         | critical |
|-------------------|--------------------------------------------------------------|----------|
| `PodCreate`       | a Job's `FailedCreate` Event: the pod was never created (Pod Security, a missing ServiceAccount, ...) | yes, but a quota |
| `ImagePull`       | waiting ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull | yes |
| `ContainerConfig` | waiting CreateContainerConfigError, CreateContainerError, RunContainerError; terminated StartError, ContainerCannotRun | yes |
| `CrashLoop`       | waiting CrashLoopBackOff; terminated with a non-zero exit code | yes |
| `Unschedulable`   | `PodScheduled=False` reason Unschedulable, no capacity marker | yes |
| `SchedulingDelayed` | Unschedulable for capacity, volumes or node state; SchedulingGated | no |

Capacity markers (case-insensitive, anywhere in the scheduler's message): "Insufficient"
(cpu, memory, nvidia.com/gpu, ...), "Too many pods", "No preemption victims found",
unbound/unavailable PersistentVolumeClaims or volumes, and nodes tainted not-ready,
unreachable or unschedulable (cordoned). Such a pod can start once the cluster frees or adds
room, so it stays retryable. Any other Unschedulable message (node selector or affinity that no
node matches, a taint no node tolerates) is structural and critical. Regular and init
containers are both checked; a pod being deleted is skipped.

Ties within a category go to the pod template role (`jobset.sigs.k8s.io/replicatedjob-name`,
else `app.kubernetes.io/component`), then the pod and container names, so the verdict is
deterministic.

`Blocker.fingerprint` is a stable hash of (category, role, container, key): the key is the
image for `ImagePull` (the kubelet alternates ErrImagePull and ImagePullBackOff with different
messages for one missing image), nothing for `CrashLoop` (the back-off delay in the message
grows), and the normalized message otherwise (digits, the pod's name and UIDs replaced). The
pod name is not part of it: the same blocker on a recreated pod keeps its fingerprint, and so
its first sighting.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aiperf.kube.names import REPLICATED_JOB_LABEL
from aiperf.kube.settings import COMPONENT_LABEL

MAX_MESSAGE = 1024
"""Longest message kept (a kubelet message can carry a whole registry response)."""


class Category(StrEnum):
    """What kind of blocker, highest priority first (see the module doc)."""

    POD_CREATE = "PodCreate"
    IMAGE_PULL = "ImagePull"
    CONTAINER_CONFIG = "ContainerConfig"
    CRASH_LOOP = "CrashLoop"
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULING_DELAYED = "SchedulingDelayed"


_RANK = {category: rank for rank, category in enumerate(Category)}
_WAITING = {
    "ErrImagePull": Category.IMAGE_PULL, "ImagePullBackOff": Category.IMAGE_PULL,
    "InvalidImageName": Category.IMAGE_PULL, "ErrImageNeverPull": Category.IMAGE_PULL,
    "CreateContainerConfigError": Category.CONTAINER_CONFIG, "CreateContainerError": Category.CONTAINER_CONFIG,
    "RunContainerError": Category.CONTAINER_CONFIG, "CrashLoopBackOff": Category.CRASH_LOOP,
}
_TERMINATED_CONFIG = frozenset({"StartError", "ContainerCannotRun"})
_RETRYABLE_MARKERS = (
    "insufficient", "too many pods", "no preemption victims found", "persistentvolumeclaim",
    "persistent volumes to bind", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable", "node(s) were unschedulable",
)
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, kw_only=True)
class Blocker:
    """One reason a pod does not start. `reason` is Kubernetes' own (ImagePullBackOff,
    Unschedulable, ...), `role` the pod template it came from, `container` None for a
    pod-level blocker (scheduling). `key` is what identifies it beyond category, role and
    container (see the module doc)."""

    category: Category
    reason: str
    message: str
    pod: str
    role: str
    container: str | None
    critical: bool
    key: str

    @property
    def fingerprint(self) -> str:
        """16 hex digits of SHA-256 over (category, role, container, key): equal for the same
        blocker on a recreated pod, different when anything that matters changed."""
        text = "\x1f".join((self.category.value, self.role, self.container or "", self.key))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_status(self, first_observed_time: str | None) -> dict[str, Any]:
        """`status.startupIssue` (camelCase, as `crd_model.StartupIssue` encodes it); the
        operator always passes a time, a report of a blocker nobody recorded passes None."""
        out: dict[str, Any] = {"reason": self.reason, "message": self.message, "pod": self.pod,
                               "fingerprint": self.fingerprint, "firstObservedTime": first_observed_time,
                               "critical": self.critical}
        if self.container is not None:
            out["container"] = self.container
        return out



def describe(issue: Mapping[str, Any]) -> str:
    """`REASON in pod P container C` (no container part for a pod-level blocker) of a
    `status.startupIssue` or `Blocker.as_status`."""
    if issue.get("reason") == FAILED_CREATE:
        return f"{FAILED_CREATE} by job {issue.get('pod')}: no pod was created"
    where = f"pod {issue.get('pod')}" + (f" container {issue['container']}" if issue.get("container") else "")
    return f"{issue.get('reason')} in {where}"


def classify(pods: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]] = ()) -> Blocker | None:
    """The highest-priority blocker of `pods` and of the `FailedCreate` `events` of their Jobs
    (see the module doc), None when none is blocked."""
    found = [b for pod in pods for b in pod_blockers(pod)] + create_blockers(events)
    if not found:
        return None
    return min(found, key=lambda b: (_RANK[b.category], b.role, b.pod, b.container or ""))


FAILED_CREATE = "FailedCreate"
_POD_NAME = re.compile(r'pods "[^"]*"')


def create_blockers(events: Iterable[Mapping[str, Any]]) -> list[Blocker]:
    """A blocker per distinct `FailedCreate` Event of a Job (its pod refused at admission): the
    Job's name stands for the pod, that name without its index for the role; an exceeded quota is
    retryable (it frees when other pods end), anything else critical."""
    out: dict[tuple[str, str], Blocker] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != FAILED_CREATE or involved.get("kind") != "Job":
            continue
        job = str(involved.get("name") or "")
        message = _clip(event.get("message"))
        key = normalize(_POD_NAME.sub('pods "<pod>"', message), job)
        role = job.rsplit("-", 1)[0]
        out[(job, key)] = Blocker(category=Category.POD_CREATE, reason=FAILED_CREATE, message=message, pod=job,
                                  role=role, container=None, critical="exceeded quota" not in message, key=key)
    return list(out.values())


def pod_blockers(pod: Mapping[str, Any]) -> list[Blocker]:
    """Every blocker of one pod: its scheduling condition and each container (init ones too)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return []
    name = str(meta.get("name", ""))
    labels = meta.get("labels") or {}
    role = str(labels.get(REPLICATED_JOB_LABEL) or labels.get(COMPONENT_LABEL) or "")
    out: list[Blocker] = []
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    if scheduled is not None and scheduled.get("status") == "False":
        reason = str(scheduled.get("reason") or "Unschedulable")
        message = _clip(scheduled.get("message"))
        structural = reason == "Unschedulable" and not is_capacity_shortage(message)
        category = Category.UNSCHEDULABLE if structural else Category.SCHEDULING_DELAYED
        out.append(Blocker(category=category, reason=reason, message=message, pod=name, role=role, container=None,
                           critical=structural, key=normalize(message, name)))
    images = {c.get("name"): c.get("image", "") for key in ("initContainers", "containers")
              for c in (pod.get("spec") or {}).get(key) or []}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            blocker = _container_blocker(cs, pod=name, role=role, image=str(cs.get("image") or
                                                                           images.get(cs.get("name")) or ""))
            if blocker is not None:
                out.append(blocker)
    return out


def _container_blocker(cs: Mapping[str, Any], *, pod: str, role: str, image: str) -> Blocker | None:
    container = str(cs.get("name", ""))
    state = cs.get("state") or {}
    waiting, terminated = state.get("waiting"), state.get("terminated")
    if waiting is not None:
        reason = str(waiting.get("reason") or "")
        category = _WAITING.get(reason)
        if category is None:
            return None  # ContainerCreating, PodInitializing: on its way
        message = _clip(waiting.get("message"))
        if category is Category.CRASH_LOOP:
            last = ((cs.get("lastState") or {}).get("terminated") or {})
            if "exitCode" in last:
                message = _clip(f"last exit code {last['exitCode']}" + (f" ({last['reason']})" if last.get("reason")
                                                                        else "") + (f"; {message}" if message else ""))
    elif terminated is not None and int(terminated.get("exitCode") or 0) != 0:
        reason = str(terminated.get("reason") or "Error")
        category = Category.CONTAINER_CONFIG if reason in _TERMINATED_CONFIG else Category.CRASH_LOOP
        detail = terminated.get("message")
        message = _clip(f"exited with code {terminated['exitCode']}" + (f": {detail}" if detail else ""))
    else:
        return None
    if category is Category.IMAGE_PULL:
        key = image
    elif category is Category.CRASH_LOOP:
        key = ""
    else:
        key = normalize(message, pod)
    return Blocker(category=category, reason=reason, message=message, pod=pod, role=role, container=container,
                   critical=True, key=key)


def is_capacity_shortage(message: str) -> bool:
    """True when a scheduler message names a shortage the cluster can resolve by itself (see the
    module doc's markers)."""
    lowered = message.lower()
    return any(marker in lowered for marker in _RETRYABLE_MARKERS)


def normalize(message: str, pod: str) -> str:
    """`message` without what differs between two sightings of one blocker: the pod's name,
    UIDs and numbers (node counts, back-off delays)."""
    text = message.replace(pod, "<pod>") if pod else message
    return _DIGITS.sub("N", _UID.sub("<uid>", text))


def _clip(message: Any) -> str:
    text = " ".join(str(message or "").split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
