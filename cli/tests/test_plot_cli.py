"""`aiperf plot` and `--auto-plot` through the CLI, on real exports (libs/plot/tests/data)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aiperf.cli.main import main
from aiperf.cli.plot import auto_plot

FIXTURES = Path(__file__).resolve().parents[2] / "libs" / "plot" / "tests" / "data"


def test_plot_writes_pngs_and_the_report_where_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["plot", str(FIXTURES / "plain"), "--output", str(out), "--no-html"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["request_latency_cdf.png", "timeline.png"]
    captured = capsys.readouterr()
    assert captured.out.strip() == f"plots: {out}/ (request_latency_cdf.png, timeline.png)"
    assert "note: left out ttft_cdf" in captured.err


def test_one_folder_is_plotted_into_its_plots_folder(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "plain", tmp_path / "run")
    assert main(["plot", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "plots" / "report.html").is_file()


@pytest.mark.parametrize("name, message", [("missing", "no such folder"), ("empty", "no profile exports")])
def test_a_folder_that_cannot_be_plotted_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 name: str, message: str) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["plot", str(FIXTURES / "plain"), "--output", str(tmp_path / "file" / "plots")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --output ") and err.count("\n") == 1


def test_auto_plot_never_raises_and_warns_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    auto_plot(tmp_path)  # no exports
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "profile_export_aiperf.json").write_text("[]")  # not a summary
    auto_plot(tmp_path / "run")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("warning: --auto-plot: ") for line in err)
    assert not (tmp_path / "run" / "plots").exists()
