"""A local artifact tree served read-only: the layouts `aiperf demo`, `--num-profile-runs` and
sweeps write, through the same routes as the operator volume."""

from __future__ import annotations

import os
from pathlib import Path

from litestar.testing import TestClient

from aiperf.results.app import create_app
from aiperf.results.local import LocalTree
from aiperf.results_server.main import UsageError, looks_like_volume, open_source

API = "/api/v1/results/local"


def run(folder: Path, mtime: float, summary: bytes = b"{}") -> None:
    folder.mkdir(parents=True)
    (folder / "profile_export_aiperf.json").write_bytes(summary)
    (folder / "profile_export.jsonl").write_bytes(b"{}\n")
    os.utime(folder / "profile_export_aiperf.json", (mtime, mtime))


def tree(base: Path) -> Path:
    run(base / "demo", 1_700_000_000.25, b'{"demo": 1}')
    (base / "demo" / "logs").mkdir()
    (base / "demo" / "logs" / "worker.log").write_text("log")
    for trial in (1, 2):
        run(base / "multi" / "profile_runs" / f"trial_000{trial}", 1_700_000_100 + trial)
        for label in ("concurrency_4", "concurrency_8"):
            run(base / "sweep" / "profile_runs" / f"trial_000{trial}" / label, 1_700_000_200 + trial)
    (base / "multi" / "aggregate").mkdir()
    (base / "multi" / "aggregate" / "profile_export_aiperf_aggregate.json").write_text("{}")
    return base


def test_every_local_layout_is_a_job_with_its_runs(tmp_path: Path) -> None:
    source = open_source(tree(tmp_path / "artifacts"))
    assert isinstance(source, LocalTree)
    with TestClient(create_app(source)) as client:
        jobs = {j["name"]: (j["runCount"], j["latestEpoch"]) for j in client.get("/api/v1/results").json()["jobs"]}
        assert jobs == {"demo": (1, "1700000000250000"), "multi": (2, "1700000102000000"),
                        "sweep.concurrency_4": (2, "1700000202000000"),
                        "sweep.concurrency_8": (2, "1700000202000000")}
        runs = client.get(f"{API}/multi/runs").json()["runs"]
        assert [r["epoch"] for r in runs] == ["1700000102000000", "1700000101000000"]
        demo = client.get(f"{API}/demo/runs/1700000000250000").json()
        assert demo["phase"] == "Completed" and [f["name"] for f in demo["files"]] == [
            "profile_export.jsonl", "profile_export_aiperf.json"]
        assert client.get(f"{API}/demo/runs/1700000000250000/profile_export_aiperf.json").content == b'{"demo": 1}'
        assert client.get(f"{API}/demo/runs/1700000000250000/logs").status_code == 404
        assert client.get(f"{API}/demo").status_code == 409
        assert client.get("/api/v1/results/bench/demo/runs").status_code == 404
    assert not any(p.name.startswith(".aiperf") for p in (tmp_path / "artifacts").rglob("*"))  # read-only


def test_a_run_folder_itself_and_same_time_trials(tmp_path: Path) -> None:
    run(tmp_path / "one", 1_700_000_000)
    run(tmp_path / "one" / "profile_runs" / "trial_0001", 1_700_000_000)
    source = LocalTree(tmp_path / "one")
    with TestClient(create_app(source)) as client:
        (job,) = client.get("/api/v1/results").json()["jobs"]
        assert (job["name"], job["runCount"]) == ("one", 2)
        epochs = [r["epoch"] for r in client.get(f"{API}/one/runs").json()["runs"]]
        assert epochs == ["1700000000000001", "1700000000000000"]  # a tie is bumped by 1 µs


def test_the_layout_is_detected_and_bad_dirs_are_usage_errors(tmp_path: Path) -> None:
    assert not looks_like_volume(tree(tmp_path / "artifacts"))
    (tmp_path / "vol" / "bench" / "run" / "1700000000").mkdir(parents=True)
    assert looks_like_volume(tmp_path / "vol")
    for base, layout, text in ((tmp_path / "none", "auto", "not a directory"),
                               (tmp_path / "vol", "sideways", "--layout")):
        try:
            open_source(base, layout)
        except UsageError as exc:
            assert text in str(exc)
        else:
            raise AssertionError("no UsageError")
