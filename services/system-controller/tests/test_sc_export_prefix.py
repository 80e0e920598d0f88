"""`--profile-export-prefix` (AIPerf 0.13.0's export naming): each export written under its
standard name also gets the prefixed name, a hard link; known suffixes are taken off the prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiperf.config import Artifacts, Benchmark, CommsOptions, RunConfig
from aiperf.config.benchmark import prefix_base, prefixed_exports
from aiperf.system_controller.report import link_prefixed_exports


def run_config(folder: Path, prefix: str | None) -> RunConfig:
    return RunConfig(run_id="r", mode="profile", comms=CommsOptions(ipc_dir="/tmp"), artifact_dir=str(folder),
                     benchmark=Benchmark(models=["m"], artifacts=Artifacts(dir=str(folder), prefix=prefix)))


@pytest.mark.parametrize(("prefix", "base"), [("run1", "run1"), ("run1.json", "run1"), ("run1_raw.jsonl", "run1"),
                                              ("a_server_metrics.parquet", "a"), ("v2.1", "v2.1")])
def test_known_suffixes_are_taken_off(prefix: str, base: str) -> None:
    assert prefix_base(prefix) == base


def test_the_prefixed_names_are_aiperfs() -> None:
    names = prefixed_exports("run1")
    assert names["profile_export_aiperf.json"] == "run1.json"
    assert names["profile_export.jsonl"] == "run1.jsonl"
    assert names["profile_export_raw.jsonl"] == "run1_raw.jsonl"
    assert names["profile_export_aiperf_timeslices.csv"] == "run1_timeslices.csv"
    assert names["server_metrics_export.json"] == "run1_server_metrics.json"
    assert names["gpu_telemetry_export.jsonl"] == "run1_gpu_telemetry.jsonl"


def test_exports_get_linked_names_and_keep_theirs(tmp_path: Path) -> None:
    (tmp_path / "profile_export_aiperf.json").write_text("{}")
    (tmp_path / "profile_export.jsonl").write_text("{}\n")
    (tmp_path / "run1.json").write_text("stale")  # from an earlier run: replaced
    made = link_prefixed_exports(run_config(tmp_path, "run1.json"))
    assert sorted(made) == ["run1.json", "run1.jsonl"]
    assert (tmp_path / "run1.json").read_text() == "{}"
    assert (tmp_path / "run1.json").stat().st_ino == (tmp_path / "profile_export_aiperf.json").stat().st_ino
    assert (tmp_path / "profile_export.jsonl").exists()
    assert link_prefixed_exports(run_config(tmp_path, None)) == []


def test_a_prefix_is_a_file_name() -> None:
    with pytest.raises(ValueError):
        Artifacts(prefix="a/b")
    with pytest.raises(ValueError, match="nothing left once the export suffix is taken off"):
        Artifacts(prefix=".json")
