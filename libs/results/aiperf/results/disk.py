"""The results volume on disk: the source of truth the SQLite index mirrors. Blocking
functions; callers run them in a worker thread.

    <base>/<ns>/<name>/
      <epoch>/                 a completed run: its export files + `.aiperf_run.json`
      .<epoch>.run.json        a run not completed (yet): uid, phase, createdAt
      .<epoch>.partial-<hex>/  a harvest being staged (never listed)
      latest.txt               the epoch of the newest successful run
    <base>/.aiperf_index.sqlite

Every file that says something (`latest.txt`, the run markers) is written staged + fsync +
`os.replace`, so a reader sees the old or the new content, never half. A completed run's
directory is renamed into place whole, marker included. A directory named by a valid key but
without the marker (an older operator's harvest) counts as completed, with the uid from its
`.aiperf_run_uid`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiperf.results.keys import is_key, order, wall_seconds
from aiperf.results.model import COMPLETED, FileInfo, RunRecord

INDEX_FILE = ".aiperf_index.sqlite"
LATEST = "latest.txt"
RUN_MARKER = ".aiperf_run.json"
LEGACY_UID = ".aiperf_run_uid"
PENDING_SUFFIX = ".run.json"
PARTIAL = ".partial-"
SWEEPS_DIR = "sweeps"
"""An AIPerfSweep's stored aggregates are job `sweeps/<name>` of its namespace (the operator's
harvest): `<namespace>/sweeps/<name>/<epoch>/`."""


def job_dir(base: Path, namespace: str, name: str) -> Path:
    return base / namespace / name


def pending_file(folder: Path, epoch: str) -> Path:
    return folder / f".{epoch}{PENDING_SUFFIX}"


DURABLE = True
"""fsync what is written (tests of many histories turn it off: the logic is the same)."""


def fsync_dir(path: Path) -> None:
    if not DURABLE:
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """`path` := `text`: staged beside it, fsynced, renamed over it, the folder fsynced."""
    staged = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    with open(staged, "w") as out:
        out.write(text)
        out.flush()
        if DURABLE:
            os.fsync(out.fileno())
    os.replace(staged, path)
    fsync_dir(path.parent)


def files_of(folder: Path) -> tuple[FileInfo, ...]:
    """The plain files of a run directory (no dot files, no subfolders), by name."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                found.append(FileInfo(name=entry.name, size=entry.stat(follow_symlinks=False).st_size))
    return tuple(sorted(found))


def marker_json(record: RunRecord) -> str:
    return json.dumps({"uid": record.uid, "phase": record.phase, "createdAt": record.created_at,
                       "completedAt": record.completed_at}) + "\n"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def read_completed(folder: Path, namespace: str, name: str, epoch: str) -> RunRecord | None:
    """The completed run stored in `folder/epoch`, or None when there is no such directory."""
    run = folder / epoch
    if not run.is_dir() or run.is_symlink():
        return None
    marker = _read_json(run / RUN_MARKER)
    if marker is None:  # an older operator's harvest
        try:
            uid = (run / LEGACY_UID).read_text().strip()
        except OSError:
            uid = ""
        marker = {"uid": uid, "createdAt": None, "completedAt": None}
    return RunRecord(namespace=namespace, name=name, epoch=epoch, uid=str(marker.get("uid") or ""),
                     phase=COMPLETED, created_at=_text(marker.get("createdAt")),
                     completed_at=_text(marker.get("completedAt")), files=files_of(run))


def read_pending(folder: Path, namespace: str, name: str, epoch: str) -> RunRecord | None:
    """The not yet completed run `epoch` (its `.<epoch>.run.json`), or None."""
    marker = _read_json(pending_file(folder, epoch))
    if marker is None:
        return None
    return RunRecord(namespace=namespace, name=name, epoch=epoch, uid=str(marker.get("uid") or ""),
                     phase=str(marker.get("phase") or "Pending"), created_at=_text(marker.get("createdAt")),
                     completed_at=_text(marker.get("completedAt")))


def read_run(base: Path, namespace: str, name: str, epoch: str) -> RunRecord | None:
    """Run `epoch` as the disk has it (completed over pending), or None."""
    folder = job_dir(base, namespace, name)
    return read_completed(folder, namespace, name, epoch) or read_pending(folder, namespace, name, epoch)


def scan_job(base: Path, namespace: str, name: str) -> list[RunRecord]:
    """Every run of one job on disk, newest first."""
    folder = job_dir(base, namespace, name)
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    epochs = {n for n in names if is_key(n)}
    epochs |= {n[1:-len(PENDING_SUFFIX)] for n in names
               if n.startswith(".") and n.endswith(PENDING_SUFFIX) and is_key(n[1:-len(PENDING_SUFFIX)])}
    runs = [r for e in epochs if (r := read_run(base, namespace, name, e)) is not None]
    return sorted(runs, key=lambda r: order(r.epoch), reverse=True)


def _folders(path: Path) -> list[str]:
    return [n for n in sorted(os.listdir(path)) if not n.startswith(".") and (path / n).is_dir()]


def job_names(base: Path) -> Iterator[tuple[str, str]]:
    """(namespace, name) of every job folder under `base` (dot entries skipped), stored sweeps
    included as `sweeps/<name>` (`SWEEPS_DIR`; a job named `sweeps` itself is one only where
    that folder holds runs)."""
    try:
        namespaces = _folders(base)
    except FileNotFoundError:
        return
    for ns in namespaces:
        for name in _folders(base / ns):
            if name != SWEEPS_DIR:
                yield ns, name
                continue
            inside = _folders(base / ns / name)
            if any(is_key(n) for n in inside) or (base / ns / name / LATEST).exists():
                yield ns, name
            yield from ((ns, f"{SWEEPS_DIR}/{n}") for n in inside if not is_key(n))


def read_latest(folder: Path) -> str | None:
    """The epoch `latest.txt` names (None: none, or not a valid key)."""
    try:
        text = (folder / LATEST).read_text().strip()
    except OSError:
        return None
    return text if is_key(text) else None


def write_latest(folder: Path, epoch: str) -> bool:
    """`latest.txt` := `epoch`, unless it names a wall-clock-newer run already (compared on the
    whole seconds: the suffix spaces overlap). True when written."""
    current = read_latest(folder)
    if current is not None and wall_seconds(current) > wall_seconds(epoch):
        return False
    write_atomic(folder / LATEST, epoch + "\n")
    return True


def remove_tree(path: Path) -> None:
    """Remove a run directory or staging directory; gone already is fine."""
    shutil.rmtree(path, ignore_errors=True)


def remove_partials(folder: Path, epoch: str) -> None:
    """Remove every staging directory of run `epoch`."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for entry in names:
        if entry.startswith(f".{epoch}{PARTIAL}"):
            remove_tree(folder / entry)


def prune_empty(folder: Path) -> None:
    """Remove a job folder (and its namespace folder) left empty."""
    for path in (folder, folder.parent):
        try:
            path.rmdir()
        except OSError:
            return


__all__ = ["INDEX_FILE", "LATEST", "LEGACY_UID", "RUN_MARKER", "SWEEPS_DIR", "fsync_dir", "job_dir", "job_names", "read_latest",
           "read_run", "scan_job", "write_atomic", "write_latest"]
