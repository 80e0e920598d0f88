"""How a run's workers are split into worker pods (one pod = one worker group `g<k>`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class WorkerLayout:
    """`pods` worker pods of `workers_per_pod` workers each, except the last pod, which holds
    `last_pod_workers` when the split is uneven (None: even). Every pod runs
    `record_processors_per_pod` record processors and one worker-group-manager.

    Groups are `g0..g<pods-1>`; the short pod, if any, is always the last group."""

    pods: int
    workers_per_pod: int
    last_pod_workers: int | None
    record_processors_per_pod: int

    @classmethod
    def split(cls, *, total_workers: int, workers_per_pod: int,
              record_processors_per_pod: int) -> WorkerLayout:
        """The layout of `total_workers` workers, at most `workers_per_pod` per pod.

        A run smaller than one pod is an even split of one pod holding them all."""
        per_pod = min(workers_per_pod, total_workers)
        pods = -(-total_workers // per_pod)
        last = total_workers - (pods - 1) * per_pod
        return cls(pods=pods, workers_per_pod=per_pod, last_pod_workers=None if last == per_pod else last,
                   record_processors_per_pod=record_processors_per_pod)

    @property
    def full_pods(self) -> int:
        """Pods holding exactly `workers_per_pod` workers (groups `g0..g<full_pods-1>`)."""
        return self.pods - (1 if self.last_pod_workers is not None else 0)

    @property
    def total_workers(self) -> int:
        """Workers across all pods."""
        return self.full_pods * self.workers_per_pod + (self.last_pod_workers or 0)

    def workers_in(self, group: int) -> int:
        """Workers of group `g<group>`."""
        if self.last_pod_workers is not None and group == self.pods - 1:
            return self.last_pod_workers
        return self.workers_per_pod

    def service_counts(self) -> dict[str, Any]:
        """The run config's `services` object for this layout.

        `last_group_workers` is added only for an uneven split. It is the proposed optional
        field of `ServiceCounts` (workers of the last group when it differs from
        `workers_per_group`); decoders that predate it skip it, so they would expect one
        full last group."""
        counts: dict[str, Any] = {
            "worker_groups": self.pods,
            "workers_per_group": self.workers_per_pod,
            "record_processors_per_group": self.record_processors_per_pod,
        }
        if self.last_pod_workers is not None:
            counts["last_group_workers"] = self.last_pod_workers
        return counts
