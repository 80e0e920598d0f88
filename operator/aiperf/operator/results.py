"""The operator's results volume: each finished run's exports under `<base>/<ns>/<name>/<epoch>/`,
kept by `aiperf.results.index.ResultsIndex` (layout, SQLite index, `latest.txt`, retention;
the `results-server` container serves the same volume).

`ResultsStore.harvest` copies every export the controller pod's results sidecar lists (through
the API server's pod proxy, `aiperf.kuberun.sidecar`) into a staging directory, fsyncing each file,
then passes it through the index's single success gate (`record_completed`): the directory is
renamed to `<epoch>/` whole, `latest.txt` moves forward (never back to an older run), the index
row says Completed, retention trims the job's oldest runs. A copy that breaks off is removed
(and retried by the caller), never advertised.

The epoch is `aiperf.results.keys.run_key` of the CR: its creationTimestamp in whole seconds
plus a six-digit suffix derived from its UID, so a CR deleted and created again within one
second gets its own directory. `status.resultsPath` is `<ns>/<name>/<epoch>`, relative to the
volume.

A deleted CR wins over its own harvest: `deleted` leaves a tombstone that interrupts the
harvest at once and that the gate checks (`RunDeleted`: nothing of the run is left); a run
that had completed before the delete stays in the history. kopf runs a CR's handlers one at a
time, so a harvest inside one of them (the create handler's closing sync, resume) holds back the
delete handler that would leave the tombstone: such a harvest also polls `gone` (is the CR being
deleted?) every `GONE_POLL_S` seconds and stops the same way when it says so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import structlog

from aiperf.kubeapi import KubeApi, KubeClusterError
from aiperf.kuberun import sidecar
from aiperf.results.disk import LATEST, RUN_MARKER
from aiperf.results.index import ResultsIndex, RunConflict
from aiperf.results.keys import run_key

log = structlog.get_logger("aiperf.operator")

GONE_POLL_S = 1.0
"""How often a harvest asks its `gone` probe whether the CR is being deleted."""

Gone = Callable[[], Awaitable[bool]]
"""A probe: True once the run's CR is being deleted (or is gone). It must not raise."""


@dataclass(frozen=True, kw_only=True)
class Harvest:
    """A stored run: `path` relative to the volume, the file names in it."""

    path: str
    files: list[str]


class RunDeleted(Exception):
    """The run's CR was deleted before its results were stored: nothing was kept."""

    @classmethod
    def of(cls, namespace: str, name: str) -> RunDeleted:
        return cls(f"{namespace}/{name} was deleted before its results were stored")


def epoch_of(cr: Mapping[str, Any]) -> str | None:
    """The run key of CR `cr` (`status.runEpoch` once set, else from its creationTimestamp and
    UID); None when it has no usable creation time."""
    recorded = (cr.get("status") or {}).get("runEpoch")
    if recorded:
        return str(recorded)
    meta = cr.get("metadata") or {}
    created = meta.get("creationTimestamp")
    if not created:
        return None
    try:
        return run_key(str(created), meta.get("uid"))
    except ValueError:
        return None


class ResultsStore:
    """The results volume mounted at `base` (created on first use); `index` keeps it (default:
    a `ResultsIndex` over `base`, retention from `AIPERF_RESULTS_KEEP`)."""

    def __init__(self, base: Path, *, index: ResultsIndex | None = None) -> None:
        self.base = base
        self.index = index or ResultsIndex(base)

    def relative(self, namespace: str, name: str, epoch: str) -> str:
        """`<ns>/<name>/<epoch>`: a run's directory relative to the volume."""
        return f"{namespace}/{name}/{epoch}"

    async def created(self, namespace: str, name: str, epoch: str, *, uid: str, created_at: str | None) -> None:
        """Record a new run (phase Pending). An index or disk failure is logged, not raised:
        the index is rebuilt from the disk when it breaks."""
        await self._quietly("created", self.index.record_created(namespace, name, epoch, uid=uid,
                                                                  created_at=created_at), namespace, name)

    async def phase(self, namespace: str, name: str, epoch: str, *, uid: str, phase: str,
                    created_at: str | None = None) -> None:
        """Record a phase change (logged, not raised, on failure)."""
        await self._quietly("phase", self.index.record_phase(namespace, name, epoch, uid=uid, phase=phase,
                                                              created_at=created_at), namespace, name)

    async def deleted(self, namespace: str, name: str, epoch: str) -> None:
        """The CR of run `epoch` was deleted: stop its harvest, drop what is not completed."""
        self.index.mark_deleted(namespace, name, epoch)
        await self._quietly("deleted", self.index.record_deleted(namespace, name, epoch), namespace, name)

    async def _quietly(self, what: str, work: Any, namespace: str, name: str) -> None:
        try:
            await work
        except (OSError, sqlite3.Error, ValueError) as exc:
            log.warning("results.index_write_failed", write=what, namespace=namespace, name=name, error=str(exc))

    async def stored(self, namespace: str, name: str, epoch: str, uid: str) -> Harvest | None:
        """Run `epoch` of `name` when an earlier harvest of CR `uid` completed it, else None."""
        done = await self.index.completed(namespace, name, epoch)
        if done is None or (done.uid and done.uid != uid):
            return None
        return Harvest(path=self.relative(namespace, name, epoch), files=[f.name for f in done.files])

    async def harvest(self, api: KubeApi, namespace: str, name: str, epoch: str, pod: str, uid: str,
                      *, created_at: str | None = None, completed_at: str | None = None,
                      gone: Gone | None = None) -> Harvest:
        """Copy the exports of run `name` (CR `uid`) from the results sidecar of `pod` into its
        run directory (see the module doc); a directory of this `uid` already there is a finished
        earlier harvest and is kept as is. KubeClusterError when the sidecar cannot be read, lists
        no export, a transfer fails (the staging directory is removed), or another CR's results
        hold the directory; RunDeleted when the CR was deleted meanwhile (the tombstone, or
        `gone`)."""
        index = self.index
        relative = self.relative(namespace, name, epoch)
        done = await index.completed(namespace, name, epoch)
        if done is not None and (not done.uid or done.uid == uid):
            return Harvest(path=relative, files=[f.name for f in done.files])
        self._check_alive(namespace, name, epoch)
        staging = await index.stage(namespace, name, epoch)
        try:
            copied = await self._unless_deleted(namespace, name, epoch, gone,
                                                lambda: self._copy(api, namespace, pod, staging))
            if not copied:
                raise RunDeleted.of(namespace, name)
            self._check_alive(namespace, name, epoch)
            stored = await index.record_completed(namespace, name, epoch, uid=uid, staging=staging,
                                                  created_at=created_at, completed_at=completed_at or _now())
        except RunConflict as exc:
            raise KubeClusterError(str(exc)) from None
        finally:
            await index.discard(staging)
        if stored is None:
            raise RunDeleted.of(namespace, name)
        return Harvest(path=relative, files=[f.name for f in stored.files])

    @staticmethod
    async def _copy(api: KubeApi, namespace: str, pod: str, staging: Path) -> None:
        """Wait for the sidecar to see the run end, then download every export it lists into
        `staging` (durably)."""
        await sidecar.wait_sidecar_ended(api, namespace, pod)
        names = await sidecar.list_exports(api, namespace, pod)
        if not names:
            raise KubeClusterError(f"the results sidecar of pod {pod} lists no export file")
        for file_name in names:
            await sidecar.download_export(api, namespace, pod, file_name, staging, durable=True)

    async def _unless_deleted(self, namespace: str, name: str, epoch: str, gone: Gone | None,
                              work: Callable[[], Awaitable[None]]) -> bool:
        """Run `work` until it ends or run `epoch` is deleted (its tombstone, or `gone` polled
        every `GONE_POLL_S`): True when it ended, False when the deletion stopped it. An error of
        `work` is raised as is (not wrapped in a group)."""
        failed: list[Exception] = []
        finished = False
        async with anyio.create_task_group() as race:
            async def stop_after(deleted: Callable[[], Awaitable[None]]) -> None:
                await deleted()
                race.cancel_scope.cancel()

            async def run() -> None:
                nonlocal finished
                try:
                    await work()
                    finished = True
                except Exception as exc:  # noqa: BLE001 - raised below, outside the task group
                    failed.append(exc)
                race.cancel_scope.cancel()

            race.start_soon(stop_after, lambda: self.index.wait_deleted(namespace, name, epoch))
            if gone is not None:
                race.start_soon(stop_after, lambda: _polled(gone))
            race.start_soon(run)
        if failed:
            raise failed[0]
        return finished

    def _check_alive(self, namespace: str, name: str, epoch: str) -> None:
        if self.index.is_deleted(namespace, name, epoch):
            raise RunDeleted.of(namespace, name)


async def _polled(gone: Gone) -> None:
    """Return once `gone` says so, asking every `GONE_POLL_S`."""
    while not await gone():
        await anyio.sleep(GONE_POLL_S)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["GONE_POLL_S", "LATEST", "RUN_MARKER", "Gone", "Harvest", "ResultsStore", "RunDeleted", "epoch_of"]
