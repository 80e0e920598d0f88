"""`aiperf kube profile`: submit a run and follow it to its end, then download its results.

The mode is decided once: operator mode when the cluster serves the AIPerfJob CRD (or
`--operator`), else direct mode (`--no-operator` forces it). Direct mode creates the run's
objects with the user's own credentials (the CURVE key Secret filled with a fresh key pair) and
watches the run's end on its pods; operator mode creates the AIPerfJob and watches its phase.
Both then copy the results from the controller pod's results sidecar (`RunPods`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from aiperf.cli.kube_deploy import Deployment, build_deployment, generate
from aiperf.cli.kube_operator import build_job, generate_job, rejected_if_invalid
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.kube_pods import RunPods
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, error, interruptible, run_async
from aiperf.cli.profile_options import ProfileFlags
from aiperf.comms import CurveKeys
from aiperf.crd.model import JobPhase
from aiperf.kube import with_curve_keys
from aiperf.kube.names import KEEP_SIDECAR_ANNOTATION
from aiperf.kubeapi import KubeApi, KubeClusterError, Obj, connect
from aiperf.kuberun import direct, jobs, sidecar


class Progress:
    """Prints a line each time a run's state changes (the `on_event` of a watch): `describe`
    turns the watched object into the line's key (state, detail), printed when it changes.
    `clock` returns seconds (injected for tests)."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name, self._clock, self._t0 = name, clock, clock()
        self._last: tuple[Any, ...] | None = None

    def show(self, line: tuple[Any, ...], text: str) -> None:
        """Print `text` when `line` differs from the last one shown."""
        if line == self._last:
            return
        self._last = line
        print(f"[{self._clock() - self._t0:6.1f}s] run {self._name}: {text}", flush=True)

    def jobset(self, state: direct.JobState, jobset: Obj) -> None:
        """A direct-mode JobSet: its state and the readiness of each replicated job."""
        status_jobs = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        ready = ", ".join(f"{j.get('name')}: {j.get('ready', 0)} ready, {j.get('succeeded', 0)} done, "
                          f"{j.get('failed', 0)} failed" for j in status_jobs)
        self.show((str(state), ready), f"{state}" + (f" ({ready})" if ready else ""))

    def job(self, job: Obj) -> None:
        """An AIPerfJob: its phase, sub-phase and request count."""
        status = job.get("status") or {}
        line = (status.get("phase") or "Submitted", status.get("subPhase"), status.get("requestsCompleted"),
                status.get("requestsTotal"))
        detail = f" ({line[1]})" if line[1] else ""
        if line[2] is not None:
            detail += f", {line[2]}/{line[3] if line[3] is not None else '?'} requests"
        self.show(line, f"{line[0]}{detail}")


def profile(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags, *, dry_run: bool,
            detach: bool, artifact_dir: str, operator: bool | None = None, keep_sidecar: bool = False) -> int:
    """`kube profile`: build, then (unless `dry_run`, which prints what `kube generate` prints,
    with `--operator` the AIPerfJob, and touches no API) submit the run and (unless `detach`)
    follow it until it ends, download its results from the results sidecar and shut that down
    (unless `keep_sidecar`). Exit 0 on a completed run, 1 on a failed or cancelled one.
    `operator` None probes the cluster for the AIPerfJob CRD; True or False forces one mode."""
    if dry_run:
        return generate_job(target, deploy, flags, None) if operator else generate(target, deploy, flags, None)

    async def work() -> int:
        deployment = build_deployment(target, deploy, flags)
        async with await connect(target.kubeconfig, target.kube_context) as api:
            if operator is True or (operator is None and await jobs.operator_installed(api)):
                return await _operator_mode(api, deployment, log_level=deploy.log_level, detach=detach,
                                            artifact_dir=artifact_dir, keep_sidecar=keep_sidecar)
            return await _direct_mode(api, deployment, detach=detach, artifact_dir=artifact_dir,
                                      keep_sidecar=keep_sidecar)

    return interruptible(lambda: run_async(work),
                         f"stopped watching; the run goes on (`aiperf kube cancel {deploy.name}` stops it)")


async def _direct_mode(api: KubeApi, deployment: Deployment, *, detach: bool, artifact_dir: str,
                       keep_sidecar: bool) -> int:
    """Create the run's objects (its CURVE keys exist only here and in the Secret, never in a
    manifest), then follow it to its end and collect its results."""
    name, namespace = deployment.settings.name, deployment.settings.namespace
    await direct.ensure_namespace_exists(api, namespace)
    for obj in await direct.create_all(api, with_curve_keys(deployment.objects, CurveKeys.generate())):
        print(f"created {obj['kind']} {namespace}/{obj['metadata']['name']}")
    if detach:
        print(f"run {name} started; follow it with `aiperf kube list -n {namespace}`, get results "
              f"with `aiperf kube results {name} --from-pods -n {namespace}`")
        return EXIT_OK
    end = await sidecar.wait_run_end(api, name, namespace, Progress(name).jobset)
    return await RunPods(api, namespace, name).collect(end, artifact_dir=artifact_dir, keep=keep_sidecar,
                                                       ttl_s=deployment.settings.ttl_seconds)


async def _operator_mode(api: KubeApi, deployment: Deployment, *, log_level: str, detach: bool,
                         artifact_dir: str, keep_sidecar: bool) -> int:
    """Create the run's AIPerfJob (checked against the CRD first), then unless `detach` watch its
    phase until it ends; then download the results (partial ones of a failed run too) from the
    controller pod's results sidecar and shut that down unless `keep_sidecar`. An attached client
    (or `keep_sidecar`) marks the CR with `KEEP_SIDECAR_ANNOTATION`: the operator, which copies
    the results to its own volume first, leaves the sidecar to it."""
    job = build_job(deployment, log_level=log_level)
    if keep_sidecar or not detach:
        job["metadata"].setdefault("annotations", {})[KEEP_SIDECAR_ANNOTATION] = "true"
    rejected_if_invalid(job)
    name, namespace = deployment.settings.name, deployment.settings.namespace
    await direct.ensure_namespace_exists(api, namespace)
    await jobs.create_job(api, job)
    print(f"created AIPerfJob {namespace}/{name}; the operator creates and runs its JobSet")
    if detach:
        print(f"run {name} submitted; follow it with `kubectl get aiperfjob {name} -n {namespace} -w`, "
              f"cancel it with `aiperf kube cancel {name} -n {namespace}`")
        return EXIT_OK
    last: dict[str, Any] = {}
    progress = Progress(name)

    def on_event(obj: Obj) -> None:
        last.update(obj)
        progress.job(obj)

    phase = await jobs.watch_job_until_done(api, name, namespace, on_event)
    if phase == JobPhase.CANCELLED:
        error(f"run {name} was cancelled")
        return EXIT_FAILED
    code = await _collect(RunPods(api, namespace, name), last, phase, keep=keep_sidecar, artifact_dir=artifact_dir,
                          ttl_s=deployment.settings.ttl_seconds)
    if phase == JobPhase.FAILED:
        error(f"run {name} failed: {_why(last)}")
        return EXIT_FAILED
    return code


async def _collect(pods: RunPods, job: Obj, phase: JobPhase, *, keep: bool, artifact_dir: str, ttl_s: int) -> int:
    """The results of an ended AIPerfJob: from its results sidecar (tolerated to fail when the
    operator stored them, or the run failed), then the path the operator stored them under."""
    stored = (job.get("status") or {}).get("resultsPath")
    end = await sidecar.controller_end(pods.api, pods.name, pods.namespace)
    code = EXIT_FAILED
    if end is not None and end.pod is not None:
        try:
            code = await pods.fetch(artifact_dir, pod=end.pod)
        except KubeClusterError as exc:
            if phase == JobPhase.COMPLETED and not stored:
                raise
            print(f"warning: no results from the results sidecar: {exc}", file=sys.stderr)
        await pods.retire(end.pod, keep=keep, ttl_s=ttl_s)
    if stored:
        print(f"results stored by the operator under {stored} (run epoch {job['status'].get('runEpoch')})")
    return EXIT_OK if stored else code


def _why(job: Obj) -> str:
    """The message of the first False condition of a failed run (what `kubectl describe` shows)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == ("True" if cond.get("type") == "TimedOut" else "False") and cond.get("message"):
            return str(cond["message"])
    return "see `kubectl describe aiperfjob`"


__all__ = ["Progress", "profile"]
