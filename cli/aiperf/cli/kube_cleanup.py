"""`kube cleanup`: delete the finished runs of a namespace (or all), older than a duration.

Finished: an AIPerfJob Completed, Failed or Cancelled (deleting the CR removes what it owns), a
direct-mode JobSet Completed or Failed (deleted with its ConfigMap, CURVE Secret, RoleBinding,
Role and ServiceAccount). A Suspended JobSet is kept: it may be queued (`kube delete` removes a
cancelled one). Age counts from when the run finished (the CR's completionTime, the JobSet's
terminal condition), else from its creation.

Every delete is fenced on the UID listed: a same-name run created since the list is kept.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import anyio

from aiperf.cli.kube_flags import parse_duration
from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.kube_runs import Run, age, age_seconds, list_runs, now
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, EXIT_USER_ERROR, error, run_async, session
from aiperf.cli.profile_args import FlagError
from aiperf.crd.model import JOB_KIND
from aiperf.kubeapi import KubeApi, KubeClusterError
from aiperf.kuberun import direct, jobs

Confirm = Callable[[str], bool]
_COMPANIONS = " with its ConfigMap, Secret, RoleBinding, Role, ServiceAccount"


def _ask(question: str) -> bool:
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _describe(run: Run) -> str:
    return f"{run.kind} {run.namespace}/{run.object_name}"


async def _delete(api: KubeApi, run: Run) -> str | None:
    """Delete one run fenced on its listed UID: None when deleted, else why it was kept.
    KubeClusterError for a failure of the cluster."""
    if run.kind == JOB_KIND:
        job = {"metadata": {"name": run.object_name, "namespace": run.namespace, "uid": run.uid}}
        return None if await jobs.delete_job(api, job) else "deleted or replaced by a new run meanwhile"
    try:
        await direct.delete(api, run.name, run.namespace, uid=run.uid)
    except direct.RunReplaced:
        return "replaced by a new run with the same name"
    return None


@dataclass(frozen=True)
class _Selection:
    """The runs `kube cleanup` found at `moment`: those `chosen` to delete, and a line on those
    `left` alone (unfinished, or finished less than the limit ago)."""

    chosen: list[Run]
    left: str
    moment: datetime


def _select(runs: list[Run], *, min_age: float, older_than: str) -> _Selection:
    """The finished runs of `runs` that ended (else were created) `min_age` seconds ago or more."""
    moment = now()
    chosen = [r for r in runs if r.done and (age_seconds(r.finished or r.created, moment) or 0.0) >= min_age]
    young = sum(1 for r in runs if r.done) - len(chosen)
    running = len(runs) - len(chosen) - young
    left = f"{running} unfinished" + (f", {young} finished less than {older_than} ago" if young else "")
    return _Selection(chosen, left, moment)


async def _delete_all(api: KubeApi, chosen: list[Run]) -> tuple[int, int, int]:
    """Delete each run of `chosen` (UID-fenced), printing a line for each: (deleted, kept, failed)."""
    deleted = kept = failed = 0
    for run in chosen:
        try:
            why = await _delete(api, run)
        except KubeClusterError as exc:
            error(f"{_describe(run)}: {exc}")
            failed += 1
            continue
        if why is None:
            deleted += 1
            print(f"deleted {_describe(run)}" + ("" if run.kind == JOB_KIND else _COMPANIONS))
        else:
            kept += 1
            print(f"kept {_describe(run)}: {why}")
    return deleted, kept, failed


def _confirmation(*, dry_run: bool, yes: bool, confirm: Confirm | None) -> Confirm | None:
    """Who confirms the deletes: None with `yes` or `--dry-run`, else `confirm`, else the
    terminal's user. FlagError when no one can (no terminal, no --yes)."""
    ask = None if yes else confirm or (_ask if sys.stdin.isatty() else None)
    if not (dry_run or yes or ask):
        raise FlagError("kube cleanup deletes runs: pass --yes to confirm (or --dry-run to see what would go)")
    return ask


async def _confirmed(found: _Selection, *, dry_run: bool, ask: Confirm | None) -> bool:
    """List the chosen runs when they are to be confirmed or only shown; True when they may go
    (False, after a line saying so, for `--dry-run` or a refusal)."""
    if dry_run or ask is not None:
        for run in found.chosen:
            print(f"{'would delete' if dry_run else 'to delete'} {_describe(run)} "
                  f"({run.state} {age(run.finished or run.created, found.moment)} ago)")
    if dry_run:
        print(f"{len(found.chosen)} would be deleted (--dry-run: nothing deleted); left alone: {found.left}")
        return False
    if ask is not None and not await anyio.to_thread.run_sync(ask, f"delete these {len(found.chosen)} runs?"):
        print("nothing deleted")
        return False
    return True


def cleanup(target: KubeTarget, *, older_than: str, all_namespaces: bool, dry_run: bool, yes: bool,
            confirm: Confirm | None = None) -> int:
    """`kube cleanup`: list the runs, pick the finished ones older than `older_than`, and (unless
    `dry_run`) delete each, UID-fenced, after a confirmation (`yes` skips it; without a terminal
    it is required). Prints one line per run deleted or kept, then a count. Exit 0 when every
    chosen run was deleted or found replaced, 1 when a delete failed, 2 for a bad flag or no
    --yes without a terminal."""
    try:
        min_age = parse_duration("--older-than", older_than)
        ask = _confirmation(dry_run=dry_run, yes=yes, confirm=confirm)
    except FlagError as exc:
        error(str(exc))
        return EXIT_USER_ERROR

    async def work() -> int:
        async with session(target) as (api, namespace):
            found = _select((await list_runs(api, None if all_namespaces else namespace)).runs(),
                            min_age=min_age, older_than=older_than)
            if not found.chosen:
                where = "any namespace" if all_namespaces else f"namespace {namespace}"
                print(f"nothing to clean up in {where} ({found.left})")
                return EXIT_OK
            if not await _confirmed(found, dry_run=dry_run, ask=ask):
                return EXIT_OK
            deleted, kept, failed = await _delete_all(api, found.chosen)
        print(f"{deleted} deleted, {kept} kept, {failed} failed; left alone: {found.left}")
        return EXIT_FAILED if failed else EXIT_OK

    return run_async(work)

