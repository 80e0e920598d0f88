"""`aiperf plot`: PNG figures and a self-contained HTML report from the exports of runs and
sweeps (matplotlib, Agg; no browser).

`load_inputs(paths)` finds and reads the runs and sweeps (`PlotInputError`: one line naming the
folder); `write_plots(inputs, output)` writes `ttft_cdf.png`, `itl_cdf.png`,
`request_latency_cdf.png`, a request timeline per run, `throughput_vs_<parameter>.png` for a
sweep, and `report.html`. The figure builders (`cdf_figure`, `timeline_figure`,
`sweep_figure`) return matplotlib `Figure` objects.
"""

from aiperf.plot.figures import CDF_METRICS, CdfMetric, cdf_figure, sweep_figure, timeline_figure
from aiperf.plot.report import REPORT, Plot, Written, build_plots, render_html, write_plots
from aiperf.plot.runs import (
    PlotInputError,
    PlotInputs,
    RequestSpan,
    RunData,
    SweepData,
    SweepPoint,
    load_inputs,
)

__all__ = [
    "CDF_METRICS", "REPORT", "CdfMetric", "Plot", "PlotInputError", "PlotInputs", "RequestSpan", "RunData",
    "SweepData", "SweepPoint", "Written", "build_plots", "cdf_figure", "load_inputs", "render_html",
    "sweep_figure", "timeline_figure", "write_plots",
]
