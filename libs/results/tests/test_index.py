"""The runs index over a real results volume in a temporary directory: the writes at create,
phase change, completion and delete; `latest.txt`; retention; deletion winning over completion;
reads falling back to the disk; rebuilds of a missing or corrupt index."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import anyio
import pytest

from aiperf.results import disk
from aiperf.results.index import ResultsIndex, RunConflict, keep_from_env
from aiperf.testing.stored_runs import FILES, complete

pytestmark = pytest.mark.anyio
NS, JOB = "bench", "run"
E1, E2, E3 = "1700000000111111", "1700000100222222", "1700000200333333"


def entries(base: Path, name: str = JOB) -> list[str]:
    folder = base / NS / name
    return sorted(os.listdir(folder)) if folder.exists() else []


async def test_a_run_from_creation_to_completion(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await index.record_created(NS, JOB, E1, uid="u1", created_at="2023-11-14T22:13:20Z")
    assert entries(tmp_path) == [f".{E1}.run.json"]
    assert (await index.run(NS, JOB, E1)).phase == "Pending"  # type: ignore[union-attr]
    await index.record_phase(NS, JOB, E1, uid="u1", phase="Running")
    assert (await index.run(NS, JOB, E1)).phase == "Running"  # type: ignore[union-attr]
    stored = await complete(index, NS, JOB, E1, uid="u1", completed_at="2023-11-14T22:20:00Z")
    assert stored is not None and stored.phase == "Completed"
    assert stored.created_at == "2023-11-14T22:13:20Z" and stored.completed_at == "2023-11-14T22:20:00Z"
    assert entries(tmp_path) == [E1, "latest.txt"]  # no pending file, no staging directory
    assert (tmp_path / NS / JOB / "latest.txt").read_text() == f"{E1}\n"
    assert {p.name: p.read_bytes() for p in (tmp_path / NS / JOB / E1).iterdir()
            if not p.name.startswith(".")} == FILES
    assert {f.name: f.size for f in stored.files} == {k: len(v) for k, v in FILES.items()}
    await index.record_phase(NS, JOB, E1, uid="u1", phase="Failed")  # a late write never undoes Completed
    assert (await index.run(NS, JOB, E1)) == stored
    (job,) = await index.jobs()
    assert (job.run_count, job.latest_epoch, job.phase) == (1, E1, "Completed")


async def test_a_delayed_older_completion_never_moves_latest_back(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await complete(index, NS, JOB, E2, uid="u2")
    await complete(index, NS, JOB, E1, uid="u1")
    assert (tmp_path / NS / JOB / "latest.txt").read_text() == f"{E2}\n"
    assert [r.epoch for r in await index.runs(NS, JOB) or []] == [E2, E1]
    assert await index.latest(NS, JOB) == E2


async def test_a_same_second_recreation_lands_in_its_own_directory(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    first, second = "1700000000000001", "1700000000000002"
    await complete(index, NS, JOB, first, uid="a", files={"profile_export_aiperf.json": b"first"})
    await complete(index, NS, JOB, second, uid="b", files={"profile_export_aiperf.json": b"second"})
    assert (tmp_path / NS / JOB / first / "profile_export_aiperf.json").read_bytes() == b"first"
    assert (tmp_path / NS / JOB / second / "profile_export_aiperf.json").read_bytes() == b"second"
    again = await complete(index, NS, JOB, first, uid="a", files={"profile_export_aiperf.json": b"again"})
    assert again is not None and (tmp_path / NS / JOB / first / "profile_export_aiperf.json").read_bytes() == b"first"
    with pytest.raises(RunConflict):
        await complete(index, NS, JOB, first, uid="someone-else")
    assert not [e for e in entries(tmp_path) if ".partial-" in e]


async def test_retention_keeps_the_newest_runs_but_never_the_one_just_written_or_one_going_on(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=2)
    going = "1600000000000000"
    await index.record_created(NS, JOB, going, uid="g", created_at=None)
    await index.record_phase(NS, JOB, going, uid="g", phase="Running")
    for epoch in (E1, E2, E3):
        await complete(index, NS, JOB, epoch, uid=epoch)
    assert entries(tmp_path) == [f".{going}.run.json", E2, E3, "latest.txt"]
    late = "1699999999000000"  # an older run whose completion arrives last
    await complete(index, NS, JOB, late, uid="late")
    assert entries(tmp_path) == [f".{going}.run.json", late, E2, E3, "latest.txt"]
    assert sorted(r.epoch for r in await index.runs(NS, JOB) or []) == [going, late, E2, E3]
    assert (tmp_path / NS / JOB / "latest.txt").read_text() == f"{E3}\n"


async def test_a_completion_after_delete_leaves_no_row_and_no_directory(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await index.record_created(NS, JOB, E1, uid="u1", created_at=None)
    staging = await index.stage(NS, JOB, E1)
    (staging / "profile_export_aiperf.json").write_bytes(b"{}")
    await index.record_deleted(NS, JOB, E1)
    assert index.is_deleted(NS, JOB, E1)
    assert await index.record_completed(NS, JOB, E1, uid="u1", staging=staging, created_at=None,
                                        completed_at="2023-11-14T22:20:00Z") is None
    assert not (tmp_path / NS / JOB).exists()  # no run dir, no pending file, no staging dir
    assert await index.run(NS, JOB, E1) is None and await index.runs(NS, JOB) is None
    assert (await index.dump()) == ([], [])
    await index.record_phase(NS, JOB, E1, uid="u1", phase="Failed")  # a late phase write is dropped too
    assert await index.run(NS, JOB, E1) is None


async def test_deletion_wins_when_it_races_a_completion(tmp_path: Path) -> None:
    """The delete starts while the completion waits for the job's lock: the tombstone is down
    before the completion looks, whichever task takes the lock first."""
    index = ResultsIndex(tmp_path, keep=10)
    await complete(index, NS, JOB, E1, uid="u1")  # an earlier run stays in the history
    await index.record_created(NS, JOB, E2, uid="u2", created_at=None)
    staging = await index.stage(NS, JOB, E2)
    (staging / "profile_export_aiperf.json").write_bytes(b"{}")
    results: list[object] = []
    lock = index._lock(NS, JOB)
    async with anyio.create_task_group() as tg:
        await lock.acquire()  # hold the job so both writers queue behind it

        async def completion() -> None:
            results.append(await index.record_completed(NS, JOB, E2, uid="u2", staging=staging, created_at=None,
                                                        completed_at="x"))

        tg.start_soon(completion)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(index.record_deleted, NS, JOB, E2)
        await anyio.wait_all_tasks_blocked()
        lock.release()
    assert results == [None]
    assert entries(tmp_path) == [E1, "latest.txt"]
    assert [r.epoch for r in await index.runs(NS, JOB) or []] == [E1]
    assert (tmp_path / NS / JOB / "latest.txt").read_text() == f"{E1}\n"


async def test_deleting_a_completed_run_keeps_its_results(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await complete(index, NS, JOB, E1, uid="u1")
    await index.record_deleted(NS, JOB, E1)
    assert (await index.run(NS, JOB, E1)) is not None and (tmp_path / NS / JOB / E1).is_dir()


async def test_a_missing_or_corrupt_index_is_rebuilt_from_the_disk(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await complete(index, NS, JOB, E1, uid="u1")
    await complete(index, NS, "other", E2, uid="u2")
    await index.record_created(NS, JOB, E3, uid="u3", created_at="t")
    before = await index.dump()
    assert len(before[0]) == 3
    (tmp_path / disk.INDEX_FILE).unlink()
    assert await ResultsIndex(tmp_path, keep=10).dump() == before
    (tmp_path / disk.INDEX_FILE).write_bytes(b"this is not a database" * 100)
    assert await ResultsIndex(tmp_path, keep=10).dump() == before
    with sqlite3.connect(tmp_path / disk.INDEX_FILE) as db:
        db.execute("PRAGMA user_version = 99")
    assert await ResultsIndex(tmp_path, keep=10).dump() == before


async def test_reads_fall_back_to_the_disk_and_backfill_the_index(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await complete(index, NS, JOB, E1, uid="u1")
    await complete(index, NS, "other", E2, uid="u2")
    with sqlite3.connect(tmp_path / disk.INDEX_FILE) as db:
        db.execute("DELETE FROM runs")
        db.execute("DELETE FROM jobs")
    reader = ResultsIndex(tmp_path, keep=10)
    assert (await reader.run(NS, JOB, E1)) is not None
    assert [j.name for j in await reader.jobs()] == ["other", JOB]
    with sqlite3.connect(tmp_path / disk.INDEX_FILE) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
        assert db.execute("SELECT latest FROM jobs WHERE name='other'").fetchone()[0] == E2


async def test_a_row_whose_directory_went_is_dropped_and_latest_to_a_missing_run_is_a_404(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path, keep=10)
    await complete(index, NS, JOB, E1, uid="u1")
    await complete(index, NS, JOB, E2, uid="u2")
    disk.remove_tree(tmp_path / NS / JOB / E2)  # manual delete: latest.txt names a missing directory
    assert await index.latest(NS, JOB) == E2
    assert await index.run(NS, JOB, E2) is None
    assert (await index.run(NS, JOB, E1)) is not None  # the history still works
    assert [r.epoch for r in (await index.dump())[0]] == [E1]


async def test_an_older_operators_run_directory_counts_as_completed(tmp_path: Path) -> None:
    run = tmp_path / NS / JOB / "1700000000"
    run.mkdir(parents=True)
    (run / disk.LEGACY_UID).write_text("old-uid\n")
    (run / "profile_export_aiperf.json").write_text("{}")
    (tmp_path / NS / JOB / "1700000000-abcdef01").mkdir()  # the old same-second form: not a run key
    record = await ResultsIndex(tmp_path, keep=10).run(NS, JOB, "1700000000")
    assert record is not None and (record.uid, record.phase) == ("old-uid", "Completed")
    assert [f.name for f in record.files] == ["profile_export_aiperf.json"]
    assert [r.epoch for r in await ResultsIndex(tmp_path, keep=10).runs(NS, JOB) or []] == ["1700000000"]


async def test_an_invalid_epoch_is_refused_before_any_disk_access(tmp_path: Path) -> None:
    index = ResultsIndex(tmp_path / "never", keep=10)
    for call in (index.run(NS, JOB, "../x"), index.record_deleted(NS, JOB, "latest"),
                 index.record_created(NS, JOB, "1", uid="u", created_at=None)):
        with pytest.raises(ValueError, match="not a run epoch"):
            await call
    assert not (tmp_path / "never").exists()


def test_keep_comes_from_the_environment() -> None:
    assert keep_from_env({}) == 10
    assert keep_from_env({"AIPERF_RESULTS_KEEP": "3"}) == 3
    for bad in ("0", "x", "-1"):
        with pytest.raises(ValueError, match="AIPERF_RESULTS_KEEP"):
            keep_from_env({"AIPERF_RESULTS_KEEP": bad})
