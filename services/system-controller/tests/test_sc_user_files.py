"""A cluster run's `artifacts.user_files` are written by the control plane into the artifacts
volume, named after the AIPerfJob, before the run starts; a local run leaves them to the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiperf.config import Artifacts, Benchmark, CommsOptions, RunConfig
from aiperf.config.benchmark import UserFile
from aiperf.system_controller.main import write_cluster_user_files


def config(tmp_path: Path, *, kubernetes: bool, path: str = "meta.json") -> RunConfig:
    benchmark = Benchmark(models=["m"], variables={"label": "x"}, artifacts=Artifacts(user_files=[UserFile(
        path=path, format="json", content={"job": "{{ job_name }}", "ns": "{{ namespace }}", "label": "{{ label }}"})]))
    return RunConfig(run_id="llama-c64", mode="profile", artifact_dir=str(tmp_path / "artifacts"),
                     comms=CommsOptions(ipc_dir=str(tmp_path)), benchmark=benchmark, kubernetes=kubernetes)


def test_the_control_plane_writes_a_cluster_runs_user_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPERF_NAMESPACE", "bench")
    assert write_cluster_user_files(config(tmp_path, kubernetes=True)) is None
    written = json.loads((tmp_path / "artifacts" / "meta.json").read_text())
    assert written == {"job": "llama-c64", "ns": "bench", "label": "x"}


def test_a_local_run_leaves_them_to_the_cli(tmp_path: Path) -> None:
    assert write_cluster_user_files(config(tmp_path, kubernetes=False)) is None
    assert not (tmp_path / "artifacts").exists()


def test_a_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    cfg = config(tmp_path, kubernetes=True)
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "meta.json").mkdir()  # a folder where the file goes
    problem = write_cluster_user_files(cfg)
    assert problem is not None and problem.startswith("artifacts.user_files 'meta.json': ")
