"""What the results server knows about stored runs, and its JSON shapes (camelCase keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COMPLETED = "Completed"
TERMINAL_PHASES = frozenset({"Completed", "Failed", "Cancelled"})


@dataclass(frozen=True, kw_only=True, order=True)
class FileInfo:
    """One file of a run directory: its plain name and size in bytes."""

    name: str
    size: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size}


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One run of job `namespace/name`, keyed by `epoch` (`aiperf.results.keys`). `phase` is the
    CR's phase as last recorded (`Completed` once its directory is stored); `files` the export
    files of a completed run (empty before). Times are RFC 3339 text or None."""

    namespace: str
    name: str
    epoch: str
    uid: str = ""
    phase: str = "Pending"
    created_at: str | None = None
    completed_at: str | None = None
    files: tuple[FileInfo, ...] = field(default=())

    @property
    def completed(self) -> bool:
        return self.phase == COMPLETED

    def as_json(self) -> dict[str, Any]:
        """One element of `runs` in `GET .../runs` (and the body of `GET .../runs/<epoch>`)."""
        return {"epoch": self.epoch, "phase": self.phase, "uid": self.uid, "createdAt": self.created_at,
                "completedAt": self.completed_at, "files": [f.as_json() for f in self.files]}


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    """A job with stored runs: how many, the `latest.txt` epoch (None: no successful run yet),
    and the phase of its newest run."""

    namespace: str
    name: str
    run_count: int
    latest_epoch: str | None
    phase: str | None

    def as_json(self) -> dict[str, Any]:
        """One element of `jobs` in `GET /api/v1/results`."""
        return {"namespace": self.namespace, "name": self.name, "runCount": self.run_count,
                "latestEpoch": self.latest_epoch, "phase": self.phase}


__all__ = ["COMPLETED", "TERMINAL_PHASES", "FileInfo", "JobRecord", "RunRecord"]
