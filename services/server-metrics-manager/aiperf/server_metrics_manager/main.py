"""Entry of the `server-metrics-manager` container of the controller pod (Kubernetes; its own
service and image, an auxiliary service of the catalog): `server-metrics-manager --config
/config/run_config.json`.

It scrapes in-cluster what `aiperf profile` scrapes locally (`ServerMetricsManager`): follows the
phase broadcasts of the pod's event bus, writes `server_metrics_export.json/.csv` into the shared
artifacts volume once the profiling phase completed, and keeps the live CR projection in
`PROJECTION_FILE` there (the control plane's status push carries it as `status.serverMetrics`).
It exits 0 once the control plane's run-ended marker appears (exporting first if no profiling
phase completed; then it writes `SERVER_METRICS_DONE_MARKER`, which the results sidecar waits
for before it serves the run's files), or on SIGTERM. Once it follows the event bus and took its
baseline scrape it writes `SERVER_METRICS_READY_MARKER` (the control plane starts the first phase
only then) and its health port (`AIPERF_HEALTH_PORT`) turns ready; it answers alive while it runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import anyio
import structlog

from aiperf.comms import Channel, Subscriber, load_curve, zmq_context
from aiperf.config import ConfigError, load_run_config
from aiperf.config.markers import END_MARKER, SERVER_METRICS_DONE_MARKER, SERVER_METRICS_READY_MARKER
from aiperf.metrics.atomic import write_atomic
from aiperf.runtime import EXIT_USER_ERROR, addressing_of, configure_logging
from aiperf.runtime.health import HEALTH_PORT_ENV, Health, HealthServer
from aiperf.servermetrics.collector import HttpFetch
from aiperf.servermetrics.manager import ServerMetricsManager, topics, write_projection

log = structlog.get_logger("aiperf.server_metrics_manager")

SERVICE_ID = "server-metrics-manager"
PROJECTION_EVERY_S = 2.0


def main(argv: list[str] | None = None) -> int:
    """Run the container's collector for `--config`; 0 once the run ended, 2 for a bad config."""
    parser = argparse.ArgumentParser(prog="server-metrics-manager", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="path of run_config.json")
    args = parser.parse_args(argv)
    try:
        config = load_run_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    configure_logging(service_id=SERVICE_ID, level=config.runtime.log_level)
    artifacts = Path(config.artifact_dir)

    def project(projection: dict[str, object]) -> None:
        try:
            write_projection(artifacts, projection)
        except OSError as exc:
            log.warning("server_metrics.projection_unwritten", error=str(exc))

    async def go() -> None:
        addressing = addressing_of(config)
        with zmq_context(load_curve(config.comms.curve_keys_dir)) as ctx:
            async with HttpFetch() as fetch, Subscriber(
                    ctx, connect=[addressing.connect_endpoint(Channel.EVENT_BUS_BACKEND)],
                    topics=topics()) as events, anyio.create_task_group() as tg:
                started = anyio.Event()
                if port := os.environ.get(HEALTH_PORT_ENV):
                    await tg.start(HealthServer(lambda: Health(alive=True, ready=started.is_set()), port=int(port)).run)
                manager = ServerMetricsManager(config=config, fetch=fetch, on_update=project)
                await tg.start(manager.run, events)
                try:
                    write_atomic(artifacts / SERVER_METRICS_READY_MARKER, b'{"ready": true}')
                except OSError as exc:  # the control plane then starts after its wait, without us
                    log.warning("server_metrics.ready_marker_unwritten", error=str(exc))
                started.set()
                with anyio.open_signal_receiver(signal.SIGTERM) as stop_signals:
                    async with anyio.create_task_group() as waiters:

                        async def on_signal() -> None:
                            async for _ in stop_signals:
                                waiters.cancel_scope.cancel()

                        waiters.start_soon(on_signal)
                        while not (artifacts / END_MARKER).exists():
                            project(manager.projection())
                            await anyio.sleep(PROJECTION_EVERY_S)
                        waiters.cancel_scope.cancel()
                await manager.close()
                project(manager.projection())
                write_atomic(artifacts / SERVER_METRICS_DONE_MARKER, b'{"exported": true}')
                tg.cancel_scope.cancel()

    anyio.run(go)
    return 0


if __name__ == "__main__":
    sys.exit(main())
