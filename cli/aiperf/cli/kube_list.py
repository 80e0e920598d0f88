"""`kube list [--watch]`: the runs of a namespace as a table, then (with --watch) one more row
each time a run changes, like `kubectl get -w`.

The runs are the AIPerfJobs (when the cluster serves the CRD) and the direct-mode JobSets
(`aiperf.cli.kube_runs`). The watch follows both collections from the list's resourceVersion
(`aiperf.kubeapi.watch`): a cut or timed-out watch resumes where it stopped, an expired one
lists again and prints what changed meanwhile (a run gone shows as Deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import aclosing
from typing import Any

import anyio

from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.kube_runs import SELECTOR, Run, age, list_runs, now, run_of_job, run_of_jobset, served
from aiperf.cli.kube_shared import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER_ERROR,
    error,
    interruptible,
    run_async,
    session,
)
from aiperf.crd.model import JOB_KIND
from aiperf.kubeapi import JOBSETS, Event, KubeApi, KubeClusterError, Listing, Resource, watch
from aiperf.kuberun.jobs import JOBS

Emit = Callable[[str], None]
DELETED = "Deleted"


def _print(line: str) -> None:
    print(line, flush=True)


class Table:
    """Rows of runs: [NAMESPACE] NAME STATE [PROGRESS] AGE, aligned on the widths of the first
    rows printed (later rows reuse them, as `kubectl get -w` does)."""

    def __init__(self, *, all_namespaces: bool, progress: bool, emit: Emit = _print) -> None:
        self._all, self._progress, self._emit = all_namespaces, progress, emit
        self._widths: list[int] | None = None

    def _cells(self, run: Run, state: str | None = None) -> list[str]:
        cells = [run.namespace] if self._all else []
        cells += [run.name, state or run.state]
        if self._progress:
            cells.append(run.progress)
        return [*cells, age(run.created, now())]

    def header(self) -> list[str]:
        """The column names."""
        return [*(["NAMESPACE"] if self._all else []), "NAME", "STATE", *(["PROGRESS"] if self._progress else []),
                "AGE"]

    def start(self, runs: Iterable[Run]) -> None:
        """Print the header and `runs`, fixing the column widths."""
        rows = [self.header(), *(self._cells(r) for r in runs)]
        self._widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self._line(row)

    def row(self, run: Run, state: str | None = None) -> None:
        """Print one run (with `state` instead of its own, e.g. Deleted)."""
        self._line(self._cells(run, state))

    def _line(self, cells: list[str]) -> None:
        widths = self._widths or [len(c) for c in cells]
        self._emit("   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())


class RunWatch:
    """The runs known so far, printing a row for each one that changes (the watch's callbacks)."""

    def __init__(self, runs: Iterable[Run], table: Table) -> None:
        self._known = {r.key: r for r in runs}
        self._table = table

    def event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """One watch event on an object of `kind` (AIPerfJob or JobSet)."""
        run = _run(kind, obj)
        if run is not None:
            self._seen(run, deleted=event_type == "DELETED")

    def relisted(self, kind: str, items: list[dict[str, Any]]) -> None:
        """A fresh list of every object of `kind` (after an expired watch): print what changed."""
        fresh = {r.key: r for r in (_run(kind, o) for o in items) if r is not None}
        for run in [r for key, r in self._known.items() if r.kind == kind and key not in fresh]:
            self._seen(run, deleted=True)
        for run in fresh.values():
            self._seen(run, deleted=False)

    def _seen(self, run: Run, *, deleted: bool) -> None:
        if deleted:
            if self._known.pop(run.key, None) is not None:
                self._table.row(run, DELETED)
        elif self._known.get(run.key) != run:
            self._known[run.key] = run
            self._table.row(run)


def _run(kind: str, obj: dict[str, Any]) -> Run | None:
    return run_of_job(obj) if kind == JOB_KIND else run_of_jobset(obj)


async def watch_runs(api: KubeApi, namespace: str | None, *, emit: Emit = _print) -> None:
    """Print the table of the runs of `namespace` (None: all), then a row per change; until
    cancelled. KubeClusterError when the watch keeps failing."""
    collections = await list_runs(api, namespace)
    table = Table(all_namespaces=namespace is None, progress=collections.jobs is not None, emit=emit)
    runs = collections.runs()
    table.start(runs)
    seen = RunWatch(runs, table)

    async def follow(resource: Resource, start: Listing, selector: str | None) -> None:
        async def relist() -> Listing:
            fresh = await served(api, resource, namespace, label_selector=selector)
            if fresh is None:
                raise KubeClusterError(f"{resource.plural} are no longer served (the CRD was deleted?)")
            return fresh

        changes = watch(api, resource.path(namespace), start=start, relist=relist, label_selector=selector,
                        resume=True)
        async with aclosing(changes):
            async for change in changes:
                if isinstance(change, Event):
                    seen.event(resource.kind, change.type, change.object)
                else:
                    seen.relisted(resource.kind, change.items)

    async with anyio.create_task_group() as tg:
        if collections.jobs is not None:
            tg.start_soon(follow, JOBS, collections.jobs, None)
        tg.start_soon(follow, JOBSETS, collections.jobsets, SELECTOR)


def list_command(target: KubeTarget, *, all_namespaces: bool, follow: bool, timeout: float | None) -> int:
    """`kube list`: the table of runs (NAME, STATE, AGE; PROGRESS when the cluster serves
    AIPerfJobs; NAMESPACE first with --all-namespaces). With `follow`, then a row per change until
    Ctrl-C or `timeout` seconds (exit 0 either way)."""
    if timeout is not None and (not follow or timeout <= 0):
        error(f"--timeout {timeout}: " + ("only with --watch" if not follow else "must be more than 0 seconds"))
        return EXIT_USER_ERROR

    async def work() -> int:
        async with session(target) as (api, namespace):
            scope = None if all_namespaces else namespace
            if follow:
                with anyio.move_on_after(timeout):
                    await watch_runs(api, scope)
                return EXIT_OK
            collections = await list_runs(api, scope)
        runs = collections.runs()
        if not runs:
            print(f"no aiperf runs in {'any namespace' if all_namespaces else f'namespace {namespace}'}")
            return EXIT_OK
        Table(all_namespaces=all_namespaces, progress=collections.jobs is not None).start(runs)
        return EXIT_OK

    code = interruptible(lambda: run_async(work), "")
    return EXIT_OK if code == EXIT_INTERRUPTED else code
