"""The figures as objects: axis labels with units, one line per run, legends naming the runs."""

from __future__ import annotations

from pathlib import Path

from matplotlib.collections import LineCollection, PolyCollection

from aiperf.plot import CDF_METRICS, cdf_figure, load_inputs, sweep_figure, timeline_figure

TTFT, ITL, LATENCY = CDF_METRICS


def test_a_cdf_has_one_curve_per_run_with_labels_and_units(data: Path) -> None:
    runs = load_inputs([data / "streaming", data / "sweep"]).runs
    fig = cdf_figure(runs, TTFT)
    assert fig is not None
    (ax,) = fig.axes
    assert ax.get_xlabel() == "Time to first token (ms)"
    assert ax.get_ylabel() == "Requests at or below (%)"
    assert "Time to first token" in ax.get_title()
    assert len(ax.get_lines()) == 3
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.split(":")[0] for t in legend] == ["streaming", "concurrency_1", "concurrency_3"]
    assert all("p50" in t and "p99" in t and " ms" in t for t in legend)
    curve = ax.get_lines()[0]
    assert curve.get_ydata()[-1] == 100.0
    assert len(curve.get_xdata()) == len(runs[0].ttft_ms)


def test_a_cdf_leaves_out_runs_without_values_and_is_none_when_none_has_any(data: Path) -> None:
    runs = load_inputs([data / "plain", data / "streaming"]).runs
    assert cdf_figure(runs[:1], ITL) is None
    fig = cdf_figure(runs, ITL)
    assert fig is not None and len(fig.axes[0].get_lines()) == 1
    fig = cdf_figure(runs, LATENCY)
    assert fig is not None and len(fig.axes[0].get_lines()) == 2
    assert fig.axes[0].get_xlabel() == "Request latency (ms)"


def test_the_timeline_draws_waiting_receiving_and_failed_requests(data: Path) -> None:
    (run,) = load_inputs([data / "streaming"]).runs
    fig = timeline_figure(run)
    assert fig is not None
    ax, twin = fig.axes
    assert ax.get_xlabel() == "Time since the first request was sent (s)"
    assert ax.get_ylabel() == "Request (in the order sent)"
    assert twin.get_ylabel() == "Requests in flight"
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert [c.get_label() for c in bars] == ["waiting for the first token (TTFT)", "receiving tokens", "failed"]
    failed = sum(s.failed for s in run.spans)
    assert [len(c.get_segments()) for c in bars] == [len(run.spans) - failed, len(run.spans) - failed, failed]
    assert any(isinstance(c, PolyCollection) for c in twin.collections)
    assert len(ax.get_legend().get_texts()) == 4
    assert "20 requests" in ax.get_title()


def test_the_timeline_caps_the_requests_it_draws(data: Path) -> None:
    (run,) = load_inputs([data / "plain"]).runs
    fig = timeline_figure(run, max_requests=5)
    assert fig is not None
    (bars,) = (c for c in fig.axes[0].collections if isinstance(c, LineCollection))
    assert len(bars.get_segments()) == 5
    assert "first 5 of 8 requests" in fig.axes[0].get_title()


def test_the_sweep_figure_plots_throughput_and_latency_against_concurrency(data: Path) -> None:
    inputs = load_inputs([data / "sweep"])
    fig = sweep_figure(inputs.sweeps)
    assert fig is not None
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "Request throughput (requests/s)", "Output token throughput (tokens/s)", "Request latency p99 (ms)"]
    assert {ax.get_xlabel() for ax in fig.axes} == {"Concurrency (requests in flight)"}
    point = inputs.sweeps[0].points
    for ax, tag, stat in zip(fig.axes, ("request_throughput", "output_token_throughput", "request_latency"),
                             ("avg", "avg", "p99"), strict=True):
        (bars,) = ax.containers
        line = bars.lines[0]
        assert list(line.get_xdata()) == [1.0, 3.0]
        assert list(line.get_ydata()) == [p.value(tag, stat) for p in point]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["sweep"]
    assert sweep_figure([]) is None
