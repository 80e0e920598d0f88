"""An operator-mode run (`RunRef`): the AIPerfJob NAME, whose JobSet and companions the operator
owns. Cancel sets `spec.cancel`, delete removes the CR (garbage collection takes what it owns);
the pods' verbs (logs, results from the pods, attach, shutdown) are those of any run's pods."""

from __future__ import annotations

from typing import Literal

from aiperf.cli.kube_attach import Renderer, attach
from aiperf.cli.kube_debug import debug_run
from aiperf.cli.kube_pods import LogsOptions, ResultsOptions, RunPods
from aiperf.cli.kube_run_direct import DirectRun
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, error
from aiperf.cli.kube_show import Format, show_job
from aiperf.kubeapi import KubeApi, Obj, uid_of
from aiperf.kuberun import jobs


class OperatorJob:
    """The AIPerfJob `job` (as read) of `namespace` (see the module doc)."""

    def __init__(self, api: KubeApi, namespace: str, job: Obj) -> None:
        self.api, self.namespace, self.job = api, namespace, job
        self.name = str(job["metadata"]["name"])
        self.pods = RunPods(api, namespace, self.name)

    async def cancel(self) -> int:
        """Set `spec.cancel` (UID-fenced); the operator suspends the JobSet."""
        outcome = await jobs.cancel_job(self.api, self.job)
        if outcome == jobs.CancelOutcome.FINISHED:
            print(f"run {self.name} already {jobs.phase_of(self.job)}; nothing to cancel")
        else:
            print(f"cancelled run {self.name}: spec.cancel is true on AIPerfJob {self.namespace}/{self.name}; "
                  "the operator stops its pods")
        return EXIT_OK

    async def delete(self, uid: str | None) -> int:
        """Delete the AIPerfJob (UID precondition); what it owns goes with it."""
        if uid is not None and uid_of(self.job) != uid:
            error(f"AIPerfJob {self.name} is now uid {uid_of(self.job)}, not {uid}: "
                  "a new run with the same name; nothing deleted")
            return EXIT_FAILED
        if await jobs.delete_job(self.api, self.job):
            print(f"deleted AIPerfJob {self.namespace}/{self.name}; what it owns goes with it")
            return EXIT_OK
        error(f"AIPerfJob {self.name} was deleted or replaced meanwhile; "
              f"check `aiperf kube list -n {self.namespace}`")
        return EXIT_FAILED

    async def results(self, options: ResultsOptions) -> int:
        """What the operator stored (once the run ended), or from the controller pod."""
        return await self.pods.results(options)

    async def logs(self, options: LogsOptions) -> int:
        """A container's log (default: the controller pod's control plane)."""
        return await self.pods.logs(options)

    async def attach(self, renderer: Renderer, interval: float) -> int:
        """Follow the run's api until the run or its AIPerfJob ends."""
        return await attach(self.pods, renderer, ended=self._ended, interval=interval)

    async def _ended(self) -> tuple[str, bool] | None:
        job = await jobs.get_job(self.api, self.name, self.namespace)
        if job is None:  # deleted meanwhile: its JobSet tells (until it goes too)
            return await self.pods.jobset_ended()
        phase = jobs.phase_of(job)
        return (str(phase), phase == "Completed") if phase in jobs.TERMINAL_PHASES else None

    async def show(self, fmt: Format) -> int:
        """The AIPerfJob rendered (or as stored)."""
        return show_job(self.job, fmt)

    async def debug(self, fmt: Literal["text", "json"]) -> int:
        """What blocks the run: the CR's conditions and startup issue, JobSet, pods, events."""
        return await debug_run(self.api, self.name, self.namespace, self.job, fmt)

    async def shutdown(self) -> int:
        """Retire the finished run's results sidecar."""
        return await self.pods.shutdown()


async def resolve_job(api: KubeApi, namespace: str, name: str) -> OperatorJob | DirectRun:
    """`OperatorJob` when an AIPerfJob `name` exists, else `DirectRun` (its JobSet and objects)."""
    job = await jobs.get_job(api, name, namespace)
    return OperatorJob(api, namespace, job) if job is not None else DirectRun(api, namespace, name)


__all__ = ["OperatorJob", "resolve_job"]
