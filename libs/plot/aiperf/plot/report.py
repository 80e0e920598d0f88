"""Writes the plots of `aiperf plot`: PNG files and one self-contained HTML report.

The report embeds every PNG as a base64 `data:` URI and has no script, stylesheet or font from
elsewhere, so it opens offline and can be mailed as one file.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from matplotlib.figure import Figure

from aiperf.plot.figures import CDF_METRICS, cdf_figure, sweep_axis, sweep_figure, timeline_figure
from aiperf.plot.runs import PlotInputs, RunData

REPORT = "report.html"
DPI = 110


@dataclass(frozen=True, kw_only=True)
class Plot:
    """One figure, the file it is written to and what it shows."""

    file: str
    caption: str
    figure: Figure


@dataclass(kw_only=True)
class Written:
    """What `write_plots` wrote: PNG paths, the report (None with `html=False`) and the plots
    left out, with why."""

    pngs: list[Path] = field(default_factory=list)
    report: Path | None = None
    skipped: list[str] = field(default_factory=list)


def build_plots(inputs: PlotInputs) -> tuple[list[Plot], list[str]]:
    """The figures for `inputs`: a CDF per metric over all runs, a timeline per run, the sweep
    figure; and a note per figure left out for lack of data."""
    plots: list[Plot] = []
    skipped: list[str] = []
    for metric in CDF_METRICS:
        fig = cdf_figure(inputs.runs, metric)
        if fig is None:
            skipped.append(f"{metric.name}: no run has {metric.title.lower()} values "
                           "(profile_export.jsonl; TTFT and ITL need --streaming)")
            continue
        plots.append(Plot(file=f"{metric.name}.png", figure=fig,
                          caption=f"{metric.title} CDF: one curve per run"))
    many = len(inputs.runs) > 1
    for run in inputs.runs:
        fig = timeline_figure(run)
        if fig is None:
            skipped.append(f"timeline of {run.label}: no profile_export.jsonl (--export-level records)")
            continue
        name = f"timeline_{_slug(run.label)}.png" if many else "timeline.png"
        plots.append(Plot(file=name, figure=fig, caption=f"{run.label}: every request from sent to finished"))
    if inputs.sweeps:
        fig = sweep_figure(inputs.sweeps)
        if fig is None:
            skipped.append("sweep figure: the sweep aggregate has no points")
        else:
            axis = sweep_axis(inputs.sweeps[0]).rsplit(".", 1)[-1] or "parameter"
            plots.append(Plot(file=f"throughput_vs_{_slug(axis)}.png", figure=fig,
                              caption=f"Throughput and p99 latency against {axis}"))
    return plots, skipped


def write_plots(inputs: PlotInputs, output: Path, *, html_report: bool = True,
                title: str = "aiperf plot") -> Written:
    """Write every figure of `build_plots(inputs)` as `<output>/<name>.png` and, with
    `html_report`, `<output>/report.html`. Creates `output`; raises `OSError` when it cannot
    be written."""
    output.mkdir(parents=True, exist_ok=True)
    plots, skipped = build_plots(inputs)
    written = Written(skipped=skipped)
    images: list[tuple[Plot, bytes]] = []
    for plot in plots:
        buf = io.BytesIO()
        plot.figure.savefig(buf, format="png", dpi=DPI)
        data = buf.getvalue()
        (output / plot.file).write_bytes(data)
        written.pngs.append(output / plot.file)
        images.append((plot, data))
    if html_report:
        text = render_html(inputs, images, skipped=skipped, title=title)
        staged = output / f".{REPORT}.tmp"
        staged.write_text(text, encoding="utf-8")
        os.replace(staged, output / REPORT)
        written.report = output / REPORT
    return written


SUMMARY_COLUMNS = (
    ("request_count", "avg", "requests", "{:,.0f}"),
    ("request_throughput", "avg", "requests/s", "{:,.2f}"),
    ("output_token_throughput", "avg", "output tokens/s", "{:,.1f}"),
    ("time_to_first_token", "p50", "TTFT p50 (ms)", "{:,.2f}"),
    ("time_to_first_token", "p99", "TTFT p99 (ms)", "{:,.2f}"),
    ("inter_token_latency", "p50", "ITL p50 (ms)", "{:,.2f}"),
    ("inter_token_latency", "p99", "ITL p99 (ms)", "{:,.2f}"),
    ("request_latency", "p50", "latency p50 (ms)", "{:,.2f}"),
    ("request_latency", "p99", "latency p99 (ms)", "{:,.2f}"),
    ("request_error_rate", "avg", "errors (%)", "{:,.2f}"),
)


def _summary_table(runs: Sequence[RunData]) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for _, _, name, _ in SUMMARY_COLUMNS)
    rows = []
    for run in runs:
        cells = []
        for tag, stat, _, fmt in SUMMARY_COLUMNS:
            value = run.stat(tag, stat)
            cells.append(f"<td>{fmt.format(value) if value is not None else '-'}</td>")
        rows.append(f"<tr><th scope=\"row\">{html.escape(run.label)}</th>{''.join(cells)}</tr>")
    return f"<table><tr><th>run</th>{head}</tr>{''.join(rows)}</table>"


STYLE = """body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1500px}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}
th[scope=row]{text-align:left}figure{margin:1.5rem 0}img{max-width:100%;border:1px solid #eee}
figcaption{color:#555}.muted{color:#777}code{background:#f4f4f4;padding:0 .2rem}"""


def render_html(inputs: PlotInputs, images: Sequence[tuple[Plot, bytes]], *, skipped: Sequence[str],
                title: str) -> str:
    """The report: the runs and their folders, a summary table, every figure inline."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    runs = "".join(f"<li><b>{html.escape(r.label)}</b> <code>{html.escape(str(r.path))}</code></li>"
                   for r in inputs.runs)
    figures = "".join(
        f"<figure id=\"{html.escape(plot.file)}\"><img alt=\"{html.escape(plot.caption)}\" "
        f"src=\"data:image/png;base64,{base64.b64encode(data).decode('ascii')}\">"
        f"<figcaption>{html.escape(plot.caption)} (<code>{html.escape(plot.file)}</code>)</figcaption></figure>"
        for plot, data in images)
    left_out = "".join(f"<li>{html.escape(s)}</li>" for s in skipped)
    notes = f"<h2>Left out</h2><ul class=\"muted\">{left_out}</ul>" if skipped else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"muted\">written {now}</p>"
            f"<h2>Runs</h2><ul>{runs}</ul>{_summary_table(inputs.runs)}"
            f"<h2>Plots</h2>{figures}{notes}</body></html>\n")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"
