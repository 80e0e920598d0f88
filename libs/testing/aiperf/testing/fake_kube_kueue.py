"""Kueue's part for JobSets, for the fake (`FakeKube(kueue=True)`): what a cluster with Kueue
does to a JobSet handed to a LocalQueue by the label `kueue.x-k8s.io/queue-name`.

- Its mutating webhook creates such a JobSet suspended (`spec.suspend: true`), whatever the
  creator asked; a JobSet without the label is left alone (no `manageJobsWithoutQueueName`).
- `FakeKube.kueue_admit(namespace, name)` plays its controller admitting the workload
  (`admitted`): the JobSet is
  unsuspended, the flavor's node selector (if any) injected into every pod template, through
  an update that passes JobSet's webhook like Kueue's own.

Not modelled: ClusterQueues, quotas, Workload objects, preemption (Kueue suspending a running
JobSet again), admission checks, `kueue.x-k8s.io/priority-class`.
"""

from __future__ import annotations

import copy

from aiperf.testing.fake_kube_api import KindInfo, Obj
from aiperf.testing.fake_kube_jobset import GROUP

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class KueueWebhook:
    """Kueue's JobSet defaulting webhook as a store admission hook (see the module doc)."""

    def applies(self, info: KindInfo) -> bool:
        return info.group == GROUP and info.kind == "JobSet"

    def mutate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        """Create a queued JobSet suspended."""
        if old is None and (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL):
            obj.setdefault("spec", {})["suspend"] = True

    def validate(self, info: KindInfo, obj: Obj, old: Obj | None) -> None:
        return None


def admitted(jobset: Obj, node_selector: dict[str, str] | None = None) -> Obj:
    """JobSet `jobset` as Kueue's controller writes it on admission: unsuspended, with the
    flavor's `node_selector` in every pod template."""
    updated = copy.deepcopy(jobset)
    updated["spec"]["suspend"] = False
    for rjob in updated["spec"].get("replicatedJobs") or []:
        pod = rjob["template"]["spec"]["template"].setdefault("spec", {})
        if node_selector:
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **node_selector}
    return updated
