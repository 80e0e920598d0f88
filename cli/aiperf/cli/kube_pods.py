"""What a run's pods offer, whatever created them (`aiperf kube profile` directly, the operator
for an AIPerfJob, or for an AIPerfSweep its sweep-controller's JobSet): the controller pod's
logs, its results sidecar (download, retire) and its api container (`kube attach`).

`RunPods` names the JobSet (`aiperf-NAME`) and its controller replicated job; every method
prints what it did and returns an exit code (`aiperf.cli.kube_shared`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, error
from aiperf.kube.containers import CONTROL_PLANE_CONTAINER
from aiperf.kube.names import CONTROLLER_JOB
from aiperf.kubeapi import KubeApi, KubeClusterError, KubeError
from aiperf.kuberun import direct, sidecar


@dataclass(frozen=True)
class LogsOptions:
    """`kube logs`: which container (default: the controller pod's `default_container`), the
    last `tail` lines, another `pod`."""

    container: str | None = None
    tail: int | None = None
    pod: str | None = None


@dataclass(frozen=True)
class ResultsOptions:
    """`kube results`: from the controller pod's sidecar (`from_pods`) or the operator's results
    server (run `epoch`, service in `operator_namespace`), into ARTIFACT_DIR/NAME/."""

    artifact_dir: str = "artifacts"
    from_pods: bool = False
    epoch: str | None = None
    operator_namespace: str = "aiperf-system"


@dataclass(frozen=True)
class RunPods:
    """The pods of run `name` in `namespace` (JobSet `aiperf-NAME`, its controller pod)."""

    api: KubeApi
    namespace: str
    name: str

    async def logs(self, options: LogsOptions) -> int:
        """Print the log of one container (see `LogsOptions`)."""
        pod = options.pod or await direct.controller_pod(self.api, self.name, self.namespace)
        chosen = options.container if options.container is not None or options.pod is not None \
            else CONTROL_PLANE_CONTAINER
        sys.stdout.write(await direct.pod_logs(self.api, pod, self.namespace, container=chosen, tail=options.tail))
        return EXIT_OK

    async def shutdown(self) -> int:
        """Retire the finished run's controller pod: `POST /shutdown` to its results sidecar
        (which exits 0; the controller Job and the JobSet then complete). Exit 1 while the run
        is still going (its control plane runs)."""
        end = await sidecar.controller_end(self.api, self.name, self.namespace)
        if end is None or end.pod is None:
            pod = await direct.controller_pod(self.api, self.name, self.namespace)  # KubeError when there is none
            error(f"run {self.name} is still going (the control plane of pod {pod} runs); "
                  f"`aiperf kube cancel {self.name} -n {self.namespace}` stops it")
            return EXIT_FAILED
        if await sidecar.shutdown_sidecar(self.api, self.namespace, end.pod):
            print(f"results sidecar of pod {end.pod} shut down; run {self.name}'s controller pod completes")
        else:
            print(f"results sidecar of pod {end.pod} had already exited")
        return EXIT_OK

    async def results(self, options: ResultsOptions) -> int:
        """Without `from_pods` the run stored by the operator (`aiperf.cli.kube_results`); with it
        wait until the run has ended (its control plane exited), then download its result files
        from the controller pod's results sidecar (which keeps serving: `kube shutdown` retires it)."""
        if not options.from_pods:
            from aiperf.cli.kube_results import ResultsServerClient, fetch_stored

            await fetch_stored(self.api, self.name, self.namespace, options.artifact_dir, epoch=options.epoch,
                               client=ResultsServerClient(self.api, namespace=options.operator_namespace))
            return EXIT_OK
        end = await sidecar.wait_run_end(self.api, self.name, self.namespace)
        if end.state == direct.JobState.SUSPENDED:
            error(f"run {self.name} was cancelled; it has no results")
            return EXIT_FAILED
        return await self.fetch(options.artifact_dir, pod=end.pod)

    async def fetch(self, artifact_dir: str, *, pod: str | None = None) -> int:
        """Download the run's exports from its controller pod's results sidecar into
        ARTIFACT_DIR/NAME/; EXIT_FAILED when it has none."""
        dest = Path(artifact_dir) / self.name
        fetched = await sidecar.fetch_results_from_pods(self.api, self.name, self.namespace, dest, pod=pod)
        if fetched.written:
            print(f"results: {dest}/ ({', '.join(p.name for p in fetched.written)}) from pod {fetched.pod}")
        if fetched.missing:
            print(f"warning: pod {fetched.pod} has no {', '.join(fetched.missing)}", file=sys.stderr)
        if not fetched.written:
            error(f"pod {fetched.pod} has no result files; see `aiperf kube logs {self.name} -n {self.namespace}`")
            return EXIT_FAILED
        return EXIT_OK

    async def retire(self, pod: str, *, keep: bool, ttl_s: int) -> None:
        """Shut the results sidecar of `pod` down (the controller Job then completes), unless `keep`."""
        if keep:
            print(f"results sidecar of pod {pod} kept: `aiperf kube shutdown {self.name} -n {self.namespace}` retires "
                  f"it (it exits by itself {ttl_s} s after the run)")
            return
        if await sidecar.shutdown_sidecar(self.api, self.namespace, pod):
            print(f"results sidecar of pod {pod} shut down")

    async def collect(self, end: sidecar.RunEnd, *, artifact_dir: str, keep: bool, ttl_s: int) -> int:
        """After the run's end: fetch its results (partial ones of a failed run too), retire the
        sidecar, and give the exit code (1 for a failed or cancelled run)."""
        if end.state == direct.JobState.SUSPENDED:
            error(f"run {self.name} was cancelled")
            return EXIT_FAILED
        failed = not end.succeeded
        try:
            code = await self.fetch(artifact_dir, pod=end.pod)
        except KubeClusterError as exc:
            if not failed:
                raise
            print(f"warning: no results: {exc}", file=sys.stderr)
            code = EXIT_FAILED
        if end.pod is not None:
            await self.retire(end.pod, keep=keep, ttl_s=ttl_s)
        if failed:
            how = f"its control plane exited {end.exit_code}" if end.exit_code is not None else f"JobSet {end.state}"
            error(f"run {self.name} failed ({how}); see `aiperf kube logs {self.name} -n {self.namespace}`")
            return EXIT_FAILED
        return code

    async def jobset_ended(self) -> tuple[str, bool] | None:
        """(state, completed) once the run's JobSet is Completed, Failed or Suspended; None while
        it runs. KubeError when there is no such run."""
        jobset = await direct.get_jobset(self.api, self.name, self.namespace)
        if jobset is None:
            raise KubeError(f"no run {self.name} in namespace {self.namespace}; "
                            f"`aiperf kube list -n {self.namespace}` shows the runs")
        state = direct.jobset_state(jobset)
        return (str(state), state == direct.JobState.COMPLETED) if state != direct.JobState.RUNNING else None

    async def serving_pod(self) -> str | None:
        """The controller pod when it is Running, else None."""
        pods = await direct.list_pods(self.api, self.name, self.namespace, replicated_job=CONTROLLER_JOB)
        pod = direct.running_pod(pods)
        return str(pod["metadata"]["name"]) if pod is not None else None


__all__ = ["LogsOptions", "ResultsOptions", "RunPods"]
