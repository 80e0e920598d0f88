"""The runs index: `<base>/.aiperf_index.sqlite`, a mirror of the results volume for fast reads,
and the one writer API the operator calls.

Writes (the operator, at fixed points of a run's life):
- `record_created` (the CR was created: phase Pending; `.<epoch>.run.json` on disk),
- `record_phase` (a phase change of a run not completed; a run that ends Failed or Cancelled
  applies retention as a completion does, so failing runs cannot pile up past `keep`),
- `stage` + `record_completed`, the single success gate: the staged directory becomes
  `<epoch>/` (marker inside), the row says Completed, `latest.txt` moves forward (never back to
  a wall-clock-older run), and retention keeps the newest `keep` finished runs of the job (never
  the one just written, never one still going);
- `record_deleted` (the CR was deleted): a run not completed loses its row, its pending file and
  every staging directory; a completed run stays in the history (retention trims it).

Deletion wins every race with completion: `record_deleted` first leaves a tombstone for the run
(kept for the life of the process, never evicted) that wakes a harvest's `wait_deleted` (it
interrupts its transfers) and that `is_deleted` reports, then takes the job's lock, which `record_completed` holds from its tombstone check
to its last index write. Whichever takes the lock first, a completion that lands after the delete
leaves no row and no directory.

Every disk write happens before the matching index write, so the disk is always the truth: reads
use the index first and fall back to the disk when a row is missing, writing the row back
(backfill); an index that is missing, from another schema version or not a database is rebuilt
from the disk. SQLite runs in worker threads, one short connection per operation.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import structlog

from aiperf.results import disk
from aiperf.results.keys import is_key, order
from aiperf.results.model import COMPLETED, TERMINAL_PHASES, FileInfo, JobRecord, RunRecord

log = structlog.get_logger("aiperf.results")

KEEP_ENV = "AIPERF_RESULTS_KEEP"
DEFAULT_KEEP = 10
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  namespace TEXT NOT NULL, name TEXT NOT NULL, epoch TEXT NOT NULL, uid TEXT NOT NULL,
  phase TEXT NOT NULL, created_at TEXT, completed_at TEXT, files TEXT NOT NULL,
  PRIMARY KEY (namespace, name, epoch));
CREATE TABLE IF NOT EXISTS jobs (
  namespace TEXT NOT NULL, name TEXT NOT NULL, latest TEXT, PRIMARY KEY (namespace, name));
"""
T = TypeVar("T")


def keep_from_env(environ: dict[str, str] | None = None) -> int:
    """Runs kept per job: `AIPERF_RESULTS_KEEP` (default 10). ValueError when it is not an
    integer of at least 1."""
    raw = (os.environ if environ is None else environ).get(KEEP_ENV)
    if not raw:
        return DEFAULT_KEEP
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{KEEP_ENV}={raw!r} is not a whole number of runs") from None
    if value < 1:
        raise ValueError(f"{KEEP_ENV}={raw!r}: keep at least 1 run per job")
    return value


class RunConflict(Exception):
    """The run's directory already holds another CR's results (a uid-suffix collision)."""


class ResultsIndex:
    """The index over the results volume at `base` (created on first use). `keep`: finished runs
    kept per job (default `keep_from_env()`)."""

    def __init__(self, base: Path, *, keep: int | None = None) -> None:
        self.base = base
        self.keep = keep_from_env() if keep is None else keep
        if self.keep < 1:
            raise ValueError("keep at least 1 run per job")
        self.path = base / disk.INDEX_FILE
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self._tombstones: set[tuple[str, str, str]] = set()
        self._deletions: dict[tuple[str, str, str], anyio.Event] = {}
        self._ready = False
        self._open_lock = threading.Lock()

    # -- writes --------------------------------------------------------------------------------

    async def record_created(self, namespace: str, name: str, epoch: str, *, uid: str,
                             created_at: str | None) -> None:
        """Run `epoch` of CR `uid` exists (phase Pending); a run already known is left as is."""
        _check(epoch)
        async with self._lock(namespace, name):
            if self.is_deleted(namespace, name, epoch):
                return
            record = RunRecord(namespace=namespace, name=name, epoch=epoch, uid=uid, created_at=created_at)
            await self._thread(self._create_sync, record)

    def _create_sync(self, record: RunRecord) -> None:
        if disk.read_run(self.base, record.namespace, record.name, record.epoch) is not None:
            return
        folder = disk.job_dir(self.base, record.namespace, record.name)
        folder.mkdir(parents=True, exist_ok=True)
        disk.write_atomic(disk.pending_file(folder, record.epoch), disk.marker_json(record))
        self._db(lambda db: _upsert(db, record))

    async def record_phase(self, namespace: str, name: str, epoch: str, *, uid: str, phase: str,
                           created_at: str | None = None) -> None:
        """Run `epoch` entered `phase` (a run not yet known is created with it; a completed run
        keeps Completed)."""
        _check(epoch)
        async with self._lock(namespace, name):
            if self.is_deleted(namespace, name, epoch):
                return
            await self._thread(self._phase_sync, namespace, name, epoch, uid, phase, created_at)

    def _phase_sync(self, namespace: str, name: str, epoch: str, uid: str, phase: str,
                    created_at: str | None) -> None:
        current = disk.read_run(self.base, namespace, name, epoch)
        if current is not None and (current.completed or current.phase == phase):
            return
        if phase == COMPLETED:  # only the success gate stores a completed run
            return
        record = RunRecord(namespace=namespace, name=name, epoch=epoch, uid=uid, phase=phase,
                           created_at=current.created_at if current is not None else created_at)
        folder = disk.job_dir(self.base, namespace, name)
        folder.mkdir(parents=True, exist_ok=True)
        disk.write_atomic(disk.pending_file(folder, epoch), disk.marker_json(record))
        self._db(lambda db: _upsert(db, record))
        if phase in TERMINAL_PHASES:
            self._retain(namespace, name, protect=epoch)

    async def stage(self, namespace: str, name: str, epoch: str) -> Path:
        """A new empty staging directory for the harvest of run `epoch` (never listed; removed by
        `record_completed`, `record_deleted`, or `discard`)."""
        _check(epoch)
        folder = disk.job_dir(self.base, namespace, name)
        staging = folder / f".{epoch}{disk.PARTIAL}{secrets.token_hex(4)}"
        await anyio.Path(staging).mkdir(parents=True)
        return staging

    async def discard(self, staging: Path) -> None:
        """Remove a staging directory (a harvest that broke off), and its job folder when that
        is left empty."""
        def remove() -> None:
            disk.remove_tree(staging)
            disk.prune_empty(staging.parent)

        await self._thread(remove)

    async def completed(self, namespace: str, name: str, epoch: str) -> RunRecord | None:
        """Run `epoch` when its directory is stored already (a harvest to skip), else None."""
        _check(epoch)
        return await self._thread(disk.read_completed, disk.job_dir(self.base, namespace, name), namespace, name, epoch)

    async def record_completed(self, namespace: str, name: str, epoch: str, *, uid: str, staging: Path,
                               created_at: str | None, completed_at: str) -> RunRecord | None:
        """The success gate (see the module doc): `staging` becomes run `epoch`'s directory.
        Returns the stored run (the earlier one when this uid's run was stored already), None
        when the run was deleted first (`staging` is removed, nothing is left). RunConflict when
        another CR's run holds the directory."""
        _check(epoch)
        async with self._lock(namespace, name):
            if self.is_deleted(namespace, name, epoch):
                await self._thread(disk.remove_tree, staging)
                return None
            return await self._thread(self._complete_sync, namespace, name, epoch, uid, staging,
                                      created_at, completed_at)

    def _complete_sync(self, namespace: str, name: str, epoch: str, uid: str, staging: Path,
                       created_at: str | None, completed_at: str) -> RunRecord:
        folder = disk.job_dir(self.base, namespace, name)
        try:
            existing = disk.read_completed(folder, namespace, name, epoch)
            if existing is not None:
                if existing.uid and existing.uid != uid:
                    raise RunConflict(f"{namespace}/{name}/{epoch} holds the results of another run "
                                      f"(uid {existing.uid})")
                self._db(lambda db: _upsert(db, existing))
                return existing
            pending = disk.read_pending(folder, namespace, name, epoch)
            record = RunRecord(namespace=namespace, name=name, epoch=epoch, uid=uid, phase=COMPLETED,
                               created_at=pending.created_at if pending and pending.created_at else created_at,
                               completed_at=completed_at, files=disk.files_of(staging))
            disk.write_atomic(staging / disk.RUN_MARKER, disk.marker_json(record))
            disk.fsync_dir(staging)
            staging.rename(folder / epoch)
            disk.fsync_dir(folder)
        finally:
            disk.remove_tree(staging)
        with contextlib.suppress(FileNotFoundError):
            disk.pending_file(folder, epoch).unlink()
        moved = disk.write_latest(folder, epoch)
        self._db(lambda db: _upsert(db, record))
        if moved:
            self._db(lambda db: _set_latest(db, namespace, name, epoch))
        self._retain(namespace, name, protect=epoch)
        return record

    def _retain(self, namespace: str, name: str, *, protect: str) -> None:
        """Trim the job's finished runs beyond the newest `keep` (never `protect`, never a run
        still going)."""
        finished = [r for r in disk.scan_job(self.base, namespace, name) if r.phase in TERMINAL_PHASES]
        folder = disk.job_dir(self.base, namespace, name)
        for record in finished[self.keep:]:
            if record.epoch == protect:
                continue
            self._remove_sync(folder, record.epoch)
            log.info("results.retention_removed", namespace=namespace, name=name, epoch=record.epoch,
                     keep=self.keep)

    def _remove_sync(self, folder: Path, epoch: str) -> None:
        disk.remove_tree(folder / epoch)
        with contextlib.suppress(FileNotFoundError):
            disk.pending_file(folder, epoch).unlink()
        disk.remove_partials(folder, epoch)
        self._db(lambda db: db.execute("DELETE FROM runs WHERE namespace=? AND name=? AND epoch=?",
                                       (folder.parent.name, folder.name, epoch)))

    def mark_deleted(self, namespace: str, name: str, epoch: str) -> None:
        """Leave the tombstone of run `epoch` now (no I/O): any later completion of it is dropped,
        and `wait_deleted` callers wake up. Call from the event loop."""
        self._tombstones.add((namespace, name, epoch))
        self._deletion(namespace, name, epoch).set()

    async def wait_deleted(self, namespace: str, name: str, epoch: str) -> None:
        """Block until run `epoch` is deleted (a harvest races its transfers against this)."""
        await self._deletion(namespace, name, epoch).wait()

    def _deletion(self, namespace: str, name: str, epoch: str) -> anyio.Event:
        return self._deletions.setdefault((namespace, name, epoch), anyio.Event())

    def is_deleted(self, namespace: str, name: str, epoch: str) -> bool:
        """Run `epoch`'s CR was deleted (a harvest in flight should stop)."""
        return (namespace, name, epoch) in self._tombstones

    async def record_deleted(self, namespace: str, name: str, epoch: str) -> None:
        """The CR of run `epoch` was deleted (see the module doc)."""
        _check(epoch)
        self.mark_deleted(namespace, name, epoch)
        async with self._lock(namespace, name):
            await self._thread(self._delete_sync, namespace, name, epoch)

    def _delete_sync(self, namespace: str, name: str, epoch: str) -> None:
        folder = disk.job_dir(self.base, namespace, name)
        if disk.read_completed(folder, namespace, name, epoch) is None:
            self._remove_sync(folder, epoch)
            disk.prune_empty(folder)

    # -- reads ---------------------------------------------------------------------------------

    async def jobs(self) -> list[JobRecord]:
        """Every job with a stored run or a latest pointer, by namespace and name. Jobs on disk
        that the index lacks are backfilled."""
        return await self._thread(self._jobs_sync)

    def _jobs_sync(self) -> list[JobRecord]:
        rows = self._db(lambda db: db.execute(
            "SELECT namespace, name, epoch, phase FROM runs").fetchall())
        latest = dict(self._db(lambda db: [((ns, n), lt) for ns, n, lt in db.execute(
            "SELECT namespace, name, latest FROM jobs").fetchall()]))
        runs: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for ns, name, epoch, phase in rows:
            runs.setdefault((ns, name), []).append((epoch, phase))
        for ns, name in disk.job_names(self.base):
            if (ns, name) not in runs:
                backfilled = self._backfill_job(ns, name)
                if backfilled:
                    runs[(ns, name)] = [(r.epoch, r.phase) for r in backfilled]
                    latest[(ns, name)] = disk.read_latest(disk.job_dir(self.base, ns, name))
        out = []
        for (ns, name), found in sorted(runs.items()):
            newest = max(found, key=lambda item: order(item[0]))
            out.append(JobRecord(namespace=ns, name=name, run_count=len(found), latest_epoch=latest.get((ns, name)),
                                 phase=newest[1]))
        return out

    async def runs(self, namespace: str, name: str) -> list[RunRecord] | None:
        """The runs of one job, newest first; None when the job has none (index and disk)."""
        return await self._thread(self._runs_sync, namespace, name)

    def _runs_sync(self, namespace: str, name: str) -> list[RunRecord] | None:
        rows = self._db(lambda db: db.execute("SELECT * FROM runs WHERE namespace=? AND name=?",
                                              (namespace, name)).fetchall())
        records = [_record(row) for row in rows] or self._backfill_job(namespace, name)
        return sorted(records, key=lambda r: order(r.epoch), reverse=True) or None

    async def run(self, namespace: str, name: str, epoch: str) -> RunRecord | None:
        """Run `epoch` of one job, or None. A row whose completed directory is gone from the
        disk is dropped (None); a run on disk without a row is backfilled."""
        _check(epoch)
        return await self._thread(self._run_sync, namespace, name, epoch)

    def _run_sync(self, namespace: str, name: str, epoch: str) -> RunRecord | None:
        row = self._db(lambda db: db.execute("SELECT * FROM runs WHERE namespace=? AND name=? AND epoch=?",
                                             (namespace, name, epoch)).fetchone())
        if row is not None:
            indexed = _record(row)
            if not indexed.completed or (self.run_dir(namespace, name, epoch)).is_dir():
                return indexed
        record = disk.read_run(self.base, namespace, name, epoch)
        if record is None:
            if row is not None:
                self._db(lambda db: db.execute("DELETE FROM runs WHERE namespace=? AND name=? AND epoch=?",
                                               (namespace, name, epoch)))
            return None
        self._db(lambda db: _upsert(db, record))
        return record

    async def latest(self, namespace: str, name: str) -> str | None:
        """The job's `latest.txt` epoch (the disk is read: it is one small file)."""
        return await self._thread(disk.read_latest, disk.job_dir(self.base, namespace, name))

    async def folder(self, namespace: str, name: str, epoch: str) -> Path | None:
        """The directory of completed run `epoch` when it exists, else None."""
        path = self.run_dir(namespace, name, epoch)
        return path if await anyio.Path(path).is_dir() else None

    def run_dir(self, namespace: str, name: str, epoch: str) -> Path:
        """The directory of run `epoch` (it may not exist)."""
        _check(epoch)
        return disk.job_dir(self.base, namespace, name) / epoch

    def _backfill_job(self, namespace: str, name: str) -> list[RunRecord]:
        records = disk.scan_job(self.base, namespace, name)
        latest = disk.read_latest(disk.job_dir(self.base, namespace, name))

        def write(db: sqlite3.Connection) -> None:
            for record in records:
                _upsert(db, record)
            if latest is not None:
                _set_latest(db, namespace, name, latest)

        if records or latest:
            self._db(write)
            log.info("results.index_backfilled", namespace=namespace, name=name, runs=len(records))
        return records

    # -- the database --------------------------------------------------------------------------

    async def rebuild(self) -> None:
        """Replace the index with what the disk holds."""
        await self._thread(self._rebuild_sync)

    def _rebuild_sync(self) -> None:
        self._reset()
        count = _transaction(self._connect(), self._fill)
        log.info("results.index_rebuilt", path=str(self.path), runs=count)

    def _fill(self, db: sqlite3.Connection) -> int:
        count = 0
        for ns, name in disk.job_names(self.base):
            for record in disk.scan_job(self.base, ns, name):
                _upsert(db, record)
                count += 1
            latest = disk.read_latest(disk.job_dir(self.base, ns, name))
            if latest is not None:
                _set_latest(db, ns, name, latest)
        return count

    async def dump(self) -> tuple[list[RunRecord], list[tuple[str, str, str]]]:
        """Every row (runs by key, then (namespace, name, latest) pointers): what tests compare."""
        def read(db: sqlite3.Connection) -> tuple[list[RunRecord], list[tuple[str, str, str]]]:
            runs = [_record(r) for r in db.execute("SELECT * FROM runs ORDER BY namespace, name, epoch")]
            latest = [(r[0], r[1], r[2]) for r in db.execute(
                "SELECT namespace, name, latest FROM jobs WHERE latest IS NOT NULL ORDER BY namespace, name")]
            return runs, latest
        return await self._thread(self._db, read)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        db.row_factory = sqlite3.Row
        # The index is rebuilt from the disk when it breaks: it need not survive a power cut.
        db.execute(f"PRAGMA synchronous = {'NORMAL' if disk.DURABLE else 'OFF'}")
        return db

    def _reset(self) -> None:
        """A fresh empty index in place of the file (missing, corrupt or another schema)."""
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        self.base.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(self._connect()) as db:
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _ensure(self) -> None:
        """Open the index once per process: rebuild it from the disk when missing, corrupt or of
        another schema version."""
        with self._open_lock:
            if self._ready:
                return
            try:
                healthy = self.path.exists() and self._healthy()
            except sqlite3.DatabaseError as exc:
                log.warning("results.index_corrupt", path=str(self.path), error=str(exc))
                healthy = False
            if not healthy:
                self._rebuild_sync()
            self._ready = True

    def _healthy(self) -> bool:
        with contextlib.closing(self._connect()) as db:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                return False
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return False
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            return {"runs", "jobs"} <= tables

    def _db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in one transaction on a short connection (blocking: call in a thread). A
        database that turns out corrupt is rebuilt from the disk and `work` runs again."""
        self._ensure()
        try:
            return _transaction(self._connect(), work)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            log.warning("results.index_corrupt", path=str(self.path), error=str(exc))
            self._rebuild_sync()
            return _transaction(self._connect(), work)

    async def _thread(self, func: Callable[..., T], *args: object) -> T:
        return await anyio.to_thread.run_sync(func, *args)

    def _lock(self, namespace: str, name: str) -> anyio.Lock:
        return self._locks.setdefault((namespace, name), anyio.Lock())


def _transaction(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    with contextlib.closing(db):
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result


def _check(epoch: str) -> None:
    if not is_key(epoch):
        raise ValueError(f"not a run epoch: {epoch!r}")


def _upsert(db: sqlite3.Connection, record: RunRecord) -> None:
    db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (record.namespace, record.name, record.epoch, record.uid, record.phase, record.created_at,
                record.completed_at, json.dumps([[f.name, f.size] for f in record.files])))


def _set_latest(db: sqlite3.Connection, namespace: str, name: str, epoch: str) -> None:
    db.execute("INSERT OR REPLACE INTO jobs VALUES (?, ?, ?)", (namespace, name, epoch))


def _record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(namespace=row["namespace"], name=row["name"], epoch=row["epoch"], uid=row["uid"],
                     phase=row["phase"], created_at=row["created_at"], completed_at=row["completed_at"],
                     files=tuple(FileInfo(name=n, size=s) for n, s in json.loads(row["files"])))


__all__ = ["DEFAULT_KEEP", "KEEP_ENV", "ResultsIndex", "RunConflict", "keep_from_env"]
