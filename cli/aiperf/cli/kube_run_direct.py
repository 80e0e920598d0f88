"""A direct-mode run (`RunRef`): the JobSet `aiperf-NAME` and its companions, created by `aiperf
kube profile` with the user's own credentials; no AIPerfJob. Cancel suspends the JobSet, delete
removes every object of the run (each fenced on its UID)."""

from __future__ import annotations

from typing import Literal

from aiperf.cli.kube_attach import Renderer, attach
from aiperf.cli.kube_debug import debug_run
from aiperf.cli.kube_pods import LogsOptions, ResultsOptions, RunPods
from aiperf.cli.kube_shared import EXIT_OK, EXIT_USER_ERROR, error
from aiperf.cli.kube_show import Format, show_jobset
from aiperf.kube.names import jobset_name
from aiperf.kubeapi import KubeApi
from aiperf.kuberun import direct


class DirectRun:
    """Run `name` of `namespace` in direct mode (see the module doc)."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.pods = RunPods(api, namespace, name)

    async def cancel(self) -> int:
        """Suspend the JobSet (its pods stop; `kube delete` removes it)."""
        state = await direct.cancel(self.api, self.name, self.namespace)
        if state == direct.JobState.SUSPENDED:
            print(f"cancelled run {self.name}: JobSet {jobset_name(self.name)} suspended, its pods stop; "
                  f"`aiperf kube delete {self.name} -n {self.namespace}` removes it")
        else:
            print(f"run {self.name} already {state}; nothing to cancel")
        return EXIT_OK

    async def delete(self, uid: str | None) -> int:
        """Delete the JobSet, ConfigMap, CURVE Secret, RoleBinding, Role and ServiceAccount."""
        deleted = await direct.delete(self.api, self.name, self.namespace, uid=uid)
        if not deleted:
            error(f"no run {self.name} in namespace {self.namespace}; "
                  f"`aiperf kube list -n {self.namespace}` shows the runs")
            return EXIT_USER_ERROR
        print(f"deleted {', '.join(deleted)} in namespace {self.namespace}")
        return EXIT_OK

    async def results(self, options: ResultsOptions) -> int:
        """From the controller pod (`--from-pods`), else what the operator stored of this name."""
        return await self.pods.results(options)

    async def logs(self, options: LogsOptions) -> int:
        """A container's log (default: the controller pod's control plane)."""
        return await self.pods.logs(options)

    async def attach(self, renderer: Renderer, interval: float) -> int:
        """Follow the run's api until the run or its JobSet ends."""
        return await attach(self.pods, renderer, ended=self.pods.jobset_ended, interval=interval)

    async def show(self, fmt: Format) -> int:
        """A one-line summary of the JobSet (or the JobSet itself)."""
        return show_jobset(self.name, self.namespace, await direct.get_jobset(self.api, self.name, self.namespace), fmt)

    async def debug(self, fmt: Literal["text", "json"]) -> int:
        """What blocks the run: JobSet, pods, events, verdict."""
        return await debug_run(self.api, self.name, self.namespace, None, fmt)

    async def shutdown(self) -> int:
        """Retire the finished run's results sidecar."""
        return await self.pods.shutdown()


__all__ = ["DirectRun"]
