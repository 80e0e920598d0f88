"""The cyclopts application: `aiperf --help` lists every command."""

from __future__ import annotations

from typing import Annotated

import cyclopts

from aiperf.cli.passthrough import SERVICE_TYPES


def build_app() -> cyclopts.App:
    """The `aiperf` app with all its commands (imports of heavy modules stay lazy)."""
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
