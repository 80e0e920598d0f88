"""The figures of `aiperf plot`, as matplotlib `Figure` objects (no pyplot: no global state,
no GUI backend; `Figure.savefig` renders with Agg).

Each builder returns None when its data is missing (a CDF of TTFT for runs without
streaming, a timeline without `profile_export.jsonl`, a sweep figure without sweeps), so the
caller can say what it left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from aiperf.plot.runs import RunData, SweepData, SweepPoint

MAX_TIMELINE_REQUESTS = 5000
"""A timeline draws at most this many requests (the first ones sent): more is unreadable."""


@dataclass(frozen=True, kw_only=True)
class CdfMetric:
    """A per-request metric drawn as a CDF: file stem, axis name, unit, how to get the values."""

    name: str
    title: str
    unit: str
    values: Callable[[RunData], Sequence[float]]


CDF_METRICS = (
    CdfMetric(name="ttft_cdf", title="Time to first token", unit="ms", values=lambda r: r.ttft_ms),
    CdfMetric(name="itl_cdf", title="Inter-token latency", unit="ms", values=lambda r: r.itl_ms),
    CdfMetric(name="request_latency_cdf", title="Request latency", unit="ms", values=lambda r: r.latency_ms),
)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def cdf_figure(runs: Sequence[RunData], metric: CdfMetric) -> Figure | None:
    """One step curve per run that has values of `metric` (the share of requests at or below
    each value), labelled with the run, its p50, p99 and request count; None when no run has
    any. The value axis is logarithmic when the values span more than two decades."""
    with_values = [(run, np.sort(np.asarray(metric.values(run), dtype=float))) for run in runs]
    with_values = [(run, v) for run, v in with_values if v.size]
    if not with_values:
        return None
    fig = _figure(9, 5.5)
    ax = fig.add_subplot()
    for run, values in with_values:
        share = np.arange(1, values.size + 1) / values.size * 100.0
        p50, p99 = np.percentile(values, [50, 99])
        ax.step(values, share, where="post", linewidth=1.8,
                label=f"{run.label}: p50 {p50:.4g} {metric.unit}, p99 {p99:.4g} {metric.unit} (n={values.size})")
    low = min(float(v[0]) for _, v in with_values)
    high = max(float(v[-1]) for _, v in with_values)
    if low > 0 and high / low > 100:
        ax.set_xscale("log")
    ax.set_xlabel(f"{metric.title} ({metric.unit})")
    ax.set_ylabel("Requests at or below (%)")
    ax.set_ylim(0, 100.5)
    ax.set_yticks([0, 10, 25, 50, 75, 90, 100])
    ax.grid(True, alpha=0.35)
    ax.set_title(f"{metric.title}: cumulative distribution (profiling requests)")
    ax.legend(loc="lower right", fontsize="small", title="run")
    return fig


def timeline_figure(run: RunData, *, max_requests: int = MAX_TIMELINE_REQUESTS) -> Figure | None:
    """Each request as a horizontal bar from sent to finished (at most `max_requests`, the first
    sent): waiting for the first token, then receiving tokens; failed requests red; the number
    in flight on a second axis. None without per-request records."""
    spans = run.spans[:max_requests]
    if not spans:
        return None
    t0 = spans[0].start_ns
    start = np.array([s.start_ns - t0 for s in spans]) / 1e9
    end = np.array([s.end_ns - t0 for s in spans]) / 1e9
    first = np.array([(s.first_token_ns - t0) / 1e9 if s.first_token_ns is not None else np.nan for s in spans])
    failed = np.array([s.failed for s in spans])
    rows = np.arange(len(spans))
    width = max(0.4, min(4.0, 400 / len(spans)))
    fig = _figure(11, 6)
    ax = fig.add_subplot()
    streamed = ~failed & ~np.isnan(first)
    plain = ~failed & np.isnan(first)
    if streamed.any():
        ax.hlines(rows[streamed], start[streamed], first[streamed], colors="tab:orange", linewidth=width,
                  label="waiting for the first token (TTFT)")
        ax.hlines(rows[streamed], first[streamed], end[streamed], colors="tab:blue", linewidth=width,
                  label="receiving tokens")
    if plain.any():
        ax.hlines(rows[plain], start[plain], end[plain], colors="tab:blue", linewidth=width,
                  label="in flight (no first-token time)")
    if failed.any():
        ax.hlines(rows[failed], start[failed], end[failed], colors="tab:red", linewidth=width, label="failed")
    ax.set_xlabel("Time since the first request was sent (s)")
    ax.set_ylabel("Request (in the order sent)")
    ax.set_ylim(-1, len(spans))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, axis="x", alpha=0.35)
    times, in_flight = _in_flight(start, end)
    twin = ax.twinx()  # behind the bars: a shaded area, so the bars stay readable over it
    twin.set_zorder(ax.get_zorder() - 1)
    ax.patch.set_visible(False)
    twin.fill_between(times, in_flight, step="post", color="0.5", alpha=0.22, linewidth=0,
                      label="requests in flight")
    twin.set_ylabel("Requests in flight")
    twin.yaxis.set_major_locator(MaxNLocator(integer=True))
    twin.set_ylim(0, max(1, int(in_flight.max())) * 1.15)
    shown = f"first {len(spans):,} of {len(run.spans):,} requests" if len(run.spans) > len(spans) \
        else f"{len(spans):,} requests"
    ax.set_title(f"{run.label}: request timeline ({shown}, profiling phase)")
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = twin.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="upper left", fontsize="small")
    return fig


def _in_flight(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times of every start and end, and the requests in flight just after each."""
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    order = np.lexsort((steps, times))  # at equal times an end (-1) counts before a start
    return times[order], np.cumsum(steps[order])


SWEEP_PANELS = (
    ("request_throughput", "avg", "Request throughput", "requests/s"),
    ("output_token_throughput", "avg", "Output token throughput", "tokens/s"),
    ("request_latency", "p99", "Request latency p99", "ms"),
)
"""The panels of the sweep figure: (metric tag, stat, title, unit)."""

AXIS_NAMES = {
    "concurrency": "Concurrency (requests in flight)",
    "rate": "Request rate (requests/s)",
    "request_rate": "Request rate (requests/s)",
    "isl": "Input sequence length (tokens)",
    "osl": "Output sequence length (tokens)",
}


def sweep_axis(sweep: SweepData) -> str:
    """The parameter on the x axis: concurrency when swept, else the first one."""
    names = sweep.parameters or sorted({k for p in sweep.points for k in p.parameters})
    for name in names:
        if name.rsplit(".", 1)[-1] == "concurrency":
            return name
    return names[0] if names else ""


def sweep_figure(sweeps: Sequence[SweepData]) -> Figure | None:
    """Throughput (requests/s and output tokens/s) and p99 request latency against the swept
    parameter (concurrency when swept): one line per sweep, or per combination of the other
    parameters of a grid sweep, with the trials' confidence interval as error bars. None
    without a sweep that has points."""
    usable = [s for s in sweeps if s.points and sweep_axis(s)]
    if not usable:
        return None
    axis = sweep_axis(usable[0])
    fig = _figure(15, 4.8)
    axes = fig.subplots(1, len(SWEEP_PANELS))
    for ax, (tag, stat, title, unit) in zip(axes, SWEEP_PANELS, strict=True):
        for label, points in _series(usable):
            x_of = sweep_axis(points[0][0])
            xs = [p.parameters[x_of] for _, p in points]
            ys = [p.value(tag, stat) for _, p in points]
            keep = [i for i, y in enumerate(ys) if y is not None]
            if not keep:
                continue
            x = np.array([xs[i] for i in keep])
            y = np.array([ys[i] for i in keep], dtype=float)
            low = np.array([_or(points[i][1].value(tag, stat, "ci_low"), y[n]) for n, i in enumerate(keep)])
            high = np.array([_or(points[i][1].value(tag, stat, "ci_high"), y[n]) for n, i in enumerate(keep)])
            order = np.argsort(x)
            ax.errorbar(x[order], y[order], yerr=[np.clip(y - low, 0, None)[order], np.clip(high - y, 0, None)[order]],
                        marker="o", capsize=3, linewidth=1.8, label=label)
        ax.set_title(title)
        ax.set_xlabel(AXIS_NAMES.get(axis.rsplit(".", 1)[-1], axis))
        ax.set_ylabel(f"{title} ({unit})")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.35)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small", title="sweep")
    fig.suptitle(f"Sweep: throughput and latency vs {AXIS_NAMES.get(axis.rsplit('.', 1)[-1], axis).split(' (')[0].lower()}"
                 " (mean over trials, bars: confidence interval)")
    return fig


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _series(sweeps: Sequence[SweepData]) -> list[tuple[str, list[tuple[SweepData, SweepPoint]]]]:
    """One series per sweep and combination of its parameters other than the x axis."""
    out: dict[str, list[tuple[SweepData, SweepPoint]]] = {}
    for sweep in sweeps:
        axis = sweep_axis(sweep)
        for point in sweep.points:
            if axis not in point.parameters:
                continue
            others = ", ".join(f"{k.rsplit('.', 1)[-1]}={v:g}" for k, v in point.parameters.items() if k != axis)
            label = sweep.label + (f" ({others})" if others else "")
            out.setdefault(label, []).append((sweep, point))
    return list(out.items())
