"""The cyclopts application: `aiperf --help` lists every command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import cyclopts
from cyclopts import Parameter

from aiperf.cli.passthrough import SERVICE_TYPES
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.cli.sweep_options import MultiRunFlags

if TYPE_CHECKING:
    from aiperf.zygote_process import ZygoteProcess

NO_FLAGS, NO_LOCAL_FLAGS, NO_MULTI_FLAGS = ProfileFlags(), LocalFlags(), MultiRunFlags()
"""Defaults of the flag groups (every flag unset)."""


def build_app(zygote: ZygoteProcess | None = None) -> cyclopts.App:
    """The `aiperf` app with all its commands (imports of heavy modules stay lazy). `zygote`:
    one `aiperf.cli.main` started early for `profile` to adopt (a single local run only)."""
    app = cyclopts.App(
        name="aiperf",
        help="Benchmark LLM inference servers: exact latency and throughput figures "
             "(TTFT, ITL, request latency, token throughput, goodput).",
        version_flags=[],
        result_action="return_value",
    )

    @app.command
    def bringup(*, workers: int = 2, record_processors: int = 1,
                artifact_dir: Annotated[str, cyclopts.Parameter(name="--artifact-dir")] = "artifacts/bringup",
                timeout: float = 30.0) -> int:
        """Start every service as a local process, wait until all have registered, stop them.

        A smoke test of the runtime: exits 0 when every service came up and exited cleanly.

        Parameters
        ----------
        workers
            Worker processes to start.
        record_processors
            Record-processor processes to start.
        artifact_dir
            Where run_config.json and the service logs go.
        timeout
            Seconds every service has to register.
        """
        from aiperf.cli.bringup import run_bringup

        return run_bringup(workers=workers, record_processors=record_processors,
                           artifact_dir=artifact_dir, timeout=timeout)

    @app.command
    def profile(
        flags: ProfileFlags = NO_FLAGS,
        *,
        local: LocalFlags = NO_LOCAL_FLAGS,
        multi: MultiRunFlags = NO_MULTI_FLAGS,
        config: Annotated[str | None, Parameter(name=["--config", "-f"])] = None,
        log_level: str = "warning",
        verbose: Annotated[bool, Parameter(name=["--verbose", "-v"], negative=())] = False,
        auto_plot: bool = False,
        profile_startup: bool = False,
    ) -> int:
        """Benchmark an OpenAI-compatible endpoint on this machine (AIPerf 0.13 flags).

        `--concurrency N` alone is a closed loop; `--request-rate R` alone an open loop
        (arrivals by `--request-rate-mode`); both: open loop with at most N in flight.
        Stop after `--request-count` requests (default max(10, 2 x concurrency)) or after
        `--benchmark-duration` seconds (+ `--benchmark-grace-period`). Results go to
        `--artifact-dir`: profile_export_aiperf.json/.csv, profile_export.jsonl, inputs.json.
        `--num-profile-runs N` repeats it (confidence intervals over the trials); a comma list on
        a sweepable flag (`--concurrency 4,8,16`) or a config `sweep:` block runs a sweep.
        AIPerf 0.13 flags not built here are refused by name, with the reason
        (docs/compat-flags.md).

        Parameters
        ----------
        config
            AIPerf config v2 file (YAML or JSON: `schemaVersion: "2.0"` and a `benchmark:` body);
            flags given on the command line override its values.
        log_level
            Log level of the services (debug, info, warning, error); logs go to ARTIFACT_DIR/logs.
        verbose
            The same as --log-level debug.
        auto_plot
            After the exports are written, plot them into ARTIFACT_DIR/plots (as `aiperf plot`;
            a sweep: once, after its aggregates). A plot that fails is a warning, never a failed run.
        profile_startup
            Print where the run's time went (imports, forks, registrations, each state of the
            run) on stderr at the end.
        """
        import sys

        from aiperf.cli.benchmark_flags import build_benchmark
        from aiperf.cli.clock import T0_WALL_NS
        from aiperf.cli.profile import run_profile
        from aiperf.cli.sweep_run import run_sweep, wants_plan
        from aiperf.config import ConfigError

        if verbose:
            log_level = "debug"
        if wants_plan(multi, config):
            if zygote is not None:  # each run of a sweep starts its own
                zygote.close()
            return run_sweep(flags, local, multi, config_file=config, log_level=log_level, auto_plot=auto_plot)
        try:
            built = build_benchmark(flags, local, config_file=config)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return run_profile(built.benchmark, secrets=built.secrets, t0_wall_ns=T0_WALL_NS, log_level=log_level,
                           auto_plot=auto_plot, profile_startup=profile_startup, zygote=zygote)

    @app.command
    def plot(*paths: str, output: Annotated[str | None, Parameter(name=["--output", "-o"])] = None,
             html: bool = True) -> int:
        """Plot the exports of runs and sweeps: PNGs and one self-contained HTML report.

        Each PATH is a run's artifact folder (profile_export_aiperf.json, profile_export.jsonl),
        a sweep's or repeated runs' folder (profile_runs/...), or a folder holding such folders
        (default: artifacts). Writes ttft_cdf.png, itl_cdf.png, request_latency_cdf.png (one
        curve per run), timeline.png (each request: sent, first token, finished; one per run
        when comparing), throughput_vs_concurrency.png (sweeps) and report.html (the PNGs
        embedded; opens offline). No browser needed.

        Parameters
        ----------
        paths
            Run or sweep folders to plot and compare.
        output
            Where the files go (default: PATH/plots for one PATH, ./plots for several).
        html
            Also write report.html.
        """
        from aiperf.cli.plot import run_plot

        return run_plot(paths, output=output, html=html)

    @app.command
    def demo(flags: ProfileFlags = NO_FLAGS, *, local: LocalFlags = NO_LOCAL_FLAGS,
             log_level: str = "warning") -> int:
        """Benchmark the bundled mock LLM server (TTFT 40 ms, ITL 8 ms, 64 tokens) end to end.

        Takes `aiperf profile`'s flags (not --url: the demo starts its own server); by default
        --streaming --concurrency 4 --request-count 200 --isl 128 --osl 64 --random-seed 42
        --artifact-dir artifacts/demo.

        Parameters
        ----------
        log_level
            Log level of the services (debug, info, warning, error); logs go to ARTIFACT_DIR/logs.
        """
        from aiperf.cli.clock import T0_WALL_NS
        from aiperf.cli.demo import run_demo

        return run_demo(flags, local, t0_wall_ns=T0_WALL_NS, log_level=log_level)

    app.command("aiperf.cli.config_app:config_app", name="config",
                help="The benchmark model: print its JSON Schema, validate AIPerf config v2 files.")
    app.command("aiperf.cli.results_app:results_app", name="results",
                help="Serve stored results over HTTP: `aiperf results serve artifacts/`.")
    app.command("aiperf.cli.kube_app:kube_app", name="kube",
                help="Run and manage benchmarks on Kubernetes (generate, profile, list, logs, results, "
                     "cancel, delete, preflight, init).")

    @app.command(name="service")
    def service_help() -> int:
        """Run one service process by hand: `aiperf service TYPE --config run_config.json`."""
        return 0

    service_help.__doc__ = (f"Run one service process: `aiperf service TYPE --config run_config.json`. "
                            f"TYPE: {', '.join(SERVICE_TYPES)}.")

    @app.command(name="mock-server")
    def mock_server_help() -> int:
        """Run the bundled OpenAI-compatible mock LLM server (`aiperf mock-server --help`)."""
        return 0

    @app.command(name="dev-fakes")
    def dev_fakes_help() -> int:
        """Start fakes of one service's peers to debug it alone (`aiperf dev-fakes --help`)."""
        return 0

    return app
