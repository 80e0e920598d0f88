"""`aiperf plot DIR...` and `aiperf profile --auto-plot`: PNGs and an HTML report from the exports
(`aiperf.plot`). matplotlib is imported only here, when a plot is asked for."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_USER_ERROR = 2
PLOTS_DIR = "plots"
DEFAULT_INPUT = "artifacts"


def default_output(paths: Sequence[str]) -> Path:
    """`<DIR>/plots` for one folder (AIPerf's place), `./plots` for a comparison of several."""
    return Path(paths[0]) / PLOTS_DIR if len(paths) == 1 else Path(PLOTS_DIR)


def run_plot(paths: Sequence[str], *, output: str | None, html: bool) -> int:
    """Write the plots of `paths` to `output` (default: `default_output`), print what was
    written; returns the exit code (2 with one line for a folder that cannot be plotted or an
    output that cannot be written)."""
    from aiperf.plot import PlotInputError, load_inputs, write_plots

    paths = list(paths) or [DEFAULT_INPUT]
    target = Path(output) if output else default_output(paths)
    try:
        inputs = load_inputs(paths)
    except PlotInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    title = "aiperf plot: " + ", ".join(r.label for r in inputs.runs)
    try:
        written = write_plots(inputs, target, html_report=html, title=title)
    except OSError as exc:
        print(f"error: --output {target}: cannot write there ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_USER_ERROR
    for note in written.skipped:
        print(f"note: left out {note}", file=sys.stderr)
    names = [p.name for p in written.pngs] + ([written.report.name] if written.report else [])
    print(f"plots: {target}/ ({', '.join(names)})")
    return 0


def auto_plot(artifact_dir: str | Path) -> None:
    """`--auto-plot`: plot a finished run or sweep into `<artifact_dir>/plots`. Never raises
    and never changes the benchmark's exit code: whatever goes wrong is one warning line."""
    try:
        from aiperf.plot import PlotInputError, load_inputs, write_plots

        inputs = load_inputs([str(artifact_dir)])
        written = write_plots(inputs, Path(artifact_dir) / PLOTS_DIR,
                              title="aiperf: " + ", ".join(r.label for r in inputs.runs))
    except PlotInputError as exc:
        print(f"warning: --auto-plot: {exc}", file=sys.stderr)
        return
    except Exception as exc:  # noqa: BLE001  (the results are written: a plotting bug must not fail the run)
        print(f"warning: --auto-plot failed ({type(exc).__name__}: {exc}); "
              f"the results are complete, try `aiperf plot {artifact_dir}`", file=sys.stderr)
        return
    names = [p.name for p in written.pngs] + ([written.report.name] if written.report else [])
    print(f"plots: {Path(artifact_dir) / PLOTS_DIR}/ ({', '.join(names)})")
