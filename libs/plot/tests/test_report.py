"""PNG files and the self-contained HTML report, written from real exports."""

from __future__ import annotations

import re
from pathlib import Path

from matplotlib.image import imread

from aiperf.plot import build_plots, load_inputs, write_plots

PNG = b"\x89PNG\r\n\x1a\n"


def test_one_run_gives_three_cdfs_a_timeline_and_the_report(data: Path, tmp_path: Path) -> None:
    written = write_plots(load_inputs([data / "streaming"]), tmp_path / "plots")
    names = [p.name for p in written.pngs]
    assert names == ["ttft_cdf.png", "itl_cdf.png", "request_latency_cdf.png", "timeline.png"]
    for path in written.pngs:
        assert path.read_bytes()[:8] == PNG
        assert 10_000 < path.stat().st_size < 1_000_000
        height, width, _ = imread(path).shape  # decodes the whole image: a valid PNG
        assert 800 <= width <= 2000 and 400 <= height <= 1200
    assert written.report == tmp_path / "plots" / "report.html"
    assert written.skipped == []


def test_the_report_embeds_every_png_and_loads_nothing_from_elsewhere(data: Path, tmp_path: Path) -> None:
    written = write_plots(load_inputs([data / "sweep"]), tmp_path)
    assert written.report is not None
    text = written.report.read_text()
    assert text.count('src="data:image/png;base64,') == len(written.pngs)
    assert not re.search(r"""(src|href)=["'](https?:)?//""", text)
    assert "<script" not in text
    for label in ("concurrency_1", "concurrency_3"):
        assert f"<th scope=\"row\">{label}</th>" in text
    assert "throughput_vs_concurrency.png" in [p.name for p in written.pngs]
    assert written.skipped == []
    assert not list(tmp_path.glob(".*.tmp"))


def test_without_html_only_pngs_are_written(data: Path, tmp_path: Path) -> None:
    written = write_plots(load_inputs([data / "plain"]), tmp_path, html_report=False)
    assert written.report is None and not (tmp_path / "report.html").exists()
    assert [p.name for p in written.pngs] == ["request_latency_cdf.png", "timeline.png"]
    assert [s.split(":")[0] for s in written.skipped] == ["ttft_cdf", "itl_cdf"]


def test_comparing_runs_names_a_timeline_per_run(data: Path) -> None:
    plots, skipped = build_plots(load_inputs([data / "plain", data / "streaming"]))
    assert [p.file for p in plots] == ["ttft_cdf.png", "itl_cdf.png", "request_latency_cdf.png",
                                       "timeline_plain.png", "timeline_streaming.png"]
    assert skipped == []
