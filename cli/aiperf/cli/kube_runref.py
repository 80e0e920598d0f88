"""The run a `kube` verb acts on, decided once: `resolve` reads the cluster and returns a `RunRef`
whose methods are the verbs.

    kube cancel NAME                 -> OperatorJob (an AIPerfJob NAME exists) or DirectRun (its JobSet)
    kube cancel NAME --kind sweep    -> OperatorSweep (the AIPerfSweep NAME)
    kube cancel NAME --kind sweep -v 1 -t 2   -> the child AIPerfJob NAME-v1-t2, resolved as a job

A verb of `aiperf.cli.kube_app` is then one line: `act(target, selector, lambda run: run.cancel())`.
Each method prints what it did and returns the exit code (0 done, 1 the run or the cluster failed,
2 a user mistake); errors are one line (`aiperf.cli.kube_shared.guarded`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

from aiperf.cli.kube_attach import Renderer
from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.kube_pods import LogsOptions, ResultsOptions
from aiperf.cli.kube_run_job import resolve_job
from aiperf.cli.kube_run_sweep import OperatorSweep
from aiperf.cli.kube_selector import Selector
from aiperf.cli.kube_shared import EXIT_USER_ERROR, error, run_async, session
from aiperf.cli.kube_show import Format
from aiperf.kubeapi import KubeApi
from aiperf.kuberun.sweep_plan import child_job_name
from aiperf.kuberun.sweeps import SWEEPS, get_cr, no_sweep


class RunRef(Protocol):
    """A run (or sweep) in the cluster and the verbs on it."""

    name: str
    namespace: str

    async def cancel(self) -> int:
        """Stop it; its objects stay until `delete`."""
        ...

    async def delete(self, uid: str | None) -> int:
        """Delete it (only while it has `uid`, when given) with what it owns."""
        ...

    async def results(self, options: ResultsOptions) -> int:
        """Download its results into ARTIFACT_DIR/NAME/."""
        ...

    async def logs(self, options: LogsOptions) -> int:
        """Print a container's log."""
        ...

    async def attach(self, renderer: Renderer, interval: float) -> int:
        """Follow its progress until it ends."""
        ...

    async def show(self, fmt: Format) -> int:
        """Print it for people (text) or as it is stored (yaml, json)."""
        ...

    async def debug(self, fmt: Literal["text", "json"]) -> int:
        """Print what blocks it."""
        ...

    async def shutdown(self) -> int:
        """Retire its finished controller pod's results sidecar."""
        ...


async def resolve(api: KubeApi, namespace: str, selector: Selector) -> RunRef:
    """The run `selector` names (see the module doc). KubeError when a sweep does not exist; a
    job name always resolves (its verbs say when nothing is there)."""
    if selector.kind == "job":
        return await resolve_job(api, namespace, selector.name)
    sweep = await get_cr(api, SWEEPS, namespace, selector.name)
    if sweep is None:
        raise no_sweep(selector.name, namespace)
    if not selector.child:
        return OperatorSweep(api, namespace, sweep)
    return await resolve_job(api, namespace, child_job_name(selector.name, selector.variation or 0, selector.trial or 1))


def act(target: KubeTarget, selector: Selector, verb: Callable[[RunRef], Awaitable[int]]) -> int:
    """Resolve `selector` in the cluster of `target` and run `verb` on it; the exit code (2 for
    a bad selector, before any API call)."""
    if (problem := selector.problem()) is not None:
        error(problem)
        return EXIT_USER_ERROR

    async def work() -> int:
        async with session(target) as (api, namespace):
            return await verb(await resolve(api, namespace, selector))

    return run_async(work)


__all__ = ["RunRef", "act", "resolve"]
