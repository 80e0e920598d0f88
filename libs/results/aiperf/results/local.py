"""A local artifact tree as a read-only results source (`aiperf results serve DIR`).

Accepted layouts under DIR (every run is a folder holding `profile_export_aiperf.json`):

- `DIR/<name>/` (what `aiperf demo` and `aiperf profile --artifact-dir DIR/<name>` write;
  `aiperf demo` gives `artifacts/demo/`): job `local/<name>`, one run;
- `DIR/` itself a run folder: job `local/<DIR's name>`;
- repeated runs `DIR/<name>/profile_runs/trial_000N/`: job `local/<name>`, one run per trial;
- sweeps `DIR/<name>/profile_runs/trial_000N/<label>/`: job `local/<name>.<label>`, one run per
  trial;
- operator-style folders `DIR/<a>/<b>/...`: job `local/<a>.<b>` (path parts joined by dots).

Folders more than `MAX_DEPTH` levels down, dot folders and `logs/` are not searched; a job
name that is not a plain name (`SAFE_NAME`) is skipped. A run's epoch is the modification time
of its `profile_export_aiperf.json` in microseconds (`<seconds><6 digits>`, bumped by 1 µs on a
tie), so runs sort by when they finished; its phase is Completed. Nothing is written to DIR.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import anyio.to_thread

from aiperf.results import disk
from aiperf.results.keys import order
from aiperf.results.model import COMPLETED, JobRecord, RunRecord

SUMMARY = "profile_export_aiperf.json"
NAMESPACE = "local"
MAX_DEPTH = 5
SAFE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
_TRIAL = re.compile(r"\Atrial_\d+\Z")


class LocalTree:
    """The runs of the artifact tree at `base` (scanned again on every read)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def _scan(self) -> dict[str, dict[str, tuple[RunRecord, Path]]]:
        jobs: dict[str, dict[str, tuple[RunRecord, Path]]] = {}
        for folder in sorted(_run_folders(self.base, 0)):
            parts = [p for p in folder.relative_to(self.base).parts if p != "profile_runs" and not _TRIAL.match(p)]
            job = ".".join(parts) if parts else self.base.resolve().name
            if not SAFE_NAME.match(job):
                continue
            mtime_ns = (folder / SUMMARY).stat().st_mtime_ns
            micros = mtime_ns // 1000
            runs = jobs.setdefault(job, {})
            while f"{micros // 1_000_000}{micros % 1_000_000:06d}" in runs:
                micros += 1
            epoch = f"{micros // 1_000_000}{micros % 1_000_000:06d}"
            done = datetime.fromtimestamp(micros / 1e6, UTC).isoformat().replace("+00:00", "Z")
            record = RunRecord(namespace=NAMESPACE, name=job, epoch=epoch, phase=COMPLETED, completed_at=done,
                               files=disk.files_of(folder))
            runs[epoch] = (record, folder)
        return jobs

    async def jobs(self) -> list[JobRecord]:
        scanned = await anyio.to_thread.run_sync(self._scan)
        out = []
        for job, runs in sorted(scanned.items()):
            newest = max(runs, key=order)
            out.append(JobRecord(namespace=NAMESPACE, name=job, run_count=len(runs), latest_epoch=newest,
                                 phase=COMPLETED))
        return out

    async def runs(self, namespace: str, name: str) -> list[RunRecord] | None:
        runs = (await anyio.to_thread.run_sync(self._scan)).get(name) if namespace == NAMESPACE else None
        if not runs:
            return None
        return [runs[e][0] for e in sorted(runs, key=order, reverse=True)]

    async def run(self, namespace: str, name: str, epoch: str) -> RunRecord | None:
        found = await self._find(namespace, name, epoch)
        return found[0] if found is not None else None

    async def latest(self, namespace: str, name: str) -> str | None:
        runs = await self.runs(namespace, name)
        return runs[0].epoch if runs else None

    async def folder(self, namespace: str, name: str, epoch: str) -> Path | None:
        found = await self._find(namespace, name, epoch)
        return found[1] if found is not None else None

    async def _find(self, namespace: str, name: str, epoch: str) -> tuple[RunRecord, Path] | None:
        if namespace != NAMESPACE:
            return None
        return (await anyio.to_thread.run_sync(self._scan)).get(name, {}).get(epoch)


def _run_folders(folder: Path, depth: int) -> list[Path]:
    found = [folder] if (folder / SUMMARY).is_file() else []
    if depth >= MAX_DEPTH:
        return found
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith(".") or entry.name == "logs" or not entry.is_dir(follow_symlinks=False):
            continue
        found += _run_folders(Path(entry.path), depth + 1)
    return found


__all__ = ["NAMESPACE", "SUMMARY", "LocalTree"]
