"""The committed CRDs are what the generator writes, and `operator:crds -- --check` says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from _repo import chart_dir

from aiperf.crd.generator import main, render_crds


def test_the_committed_crds_are_the_generators_output() -> None:
    crds = chart_dir() / "crds"
    assert sorted(p.name for p in crds.glob("*.yaml")) == sorted(render_crds())
    for name, text in render_crds().items():
        assert (crds / name).read_text() == text, f"{name} is stale: run `./pants run operator:crds`"


def test_check_fails_with_one_line_naming_each_stale_file(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "aiperfjobs.yaml" in err and "aiperfsweeps.yaml" in err

    assert main(["--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aiperfjobs.yaml", "aiperfsweeps.yaml"]
    capsys.readouterr()
    assert main(["--dir", str(tmp_path), "--check"]) == 0

    (tmp_path / "aiperfsweeps.yaml").write_text((tmp_path / "aiperfsweeps.yaml").read_text() + "# edited\n")
    assert main(["--dir", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{tmp_path / 'aiperfsweeps.yaml'}" in err and "aiperfjobs.yaml" not in err


def test_writing_removes_files_the_generator_does_not_make(tmp_path: Path) -> None:
    (tmp_path / "old-kind.yaml").write_text("kind: Gone\n")
    assert main(["--dir", str(tmp_path), "--check"]) == 1
    assert main(["--dir", str(tmp_path)]) == 0
    assert not (tmp_path / "old-kind.yaml").exists()
