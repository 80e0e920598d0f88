"""The results sidecar of the controller pod (its own service and image, `results-sidecar` in the
service catalog's auxiliary table): `results-sidecar --artifact-dir DIR [--port 9091]
[--controller-health-port 8080] [--linger-s 300]` (`python -m aiperf.results_sidecar.main ...`
by hand).

It serves the run's exports read-only (`aiperf.results_sidecar.app`) so they outlive the control
plane: the api container exits with the run, this one stays. It registers with nobody. The run
has ended once the control plane's end marker (`aiperf.config.markers.END_MARKER`) is in DIR,
or once the control plane's health port (`--controller-health-port`, same pod, so 127.0.0.1)
has refused connections for `--gone-after-s` after having answered, or never answered within
`--startup-budget-s` (a crash leaves no marker). With `--wait-for MARKER` (repeatable) it waits,
after that, until each named marker file is in DIR too (the server-metrics container's
`SERVER_METRICS_DONE_MARKER`: it may finish its exports after the control plane), at most
`--wait-for-s` seconds, before the run counts as ended and its files are served. It exits 0 on `POST /shutdown`, on SIGTERM or
SIGINT, or `--linger-s` seconds after the run's end, so the controller Job (and the JobSet)
then completes; the Job's verdict stays the control plane's exit code. Its own probes are on
`AIPERF_HEALTH_PORT` (alive while it runs, ready while it listens). Exit 1 when it cannot listen.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.config.markers import END_MARKER, READY_MARKER
from aiperf.results_sidecar.app import RunEnd, create_results_app
from aiperf.runtime import EXIT_FAILED, EXIT_OK, configure_logging
from aiperf.runtime.errors import root_cause
from aiperf.runtime.health import HEALTH_PORT_ENV, Health, HealthServer
from aiperf.runtime.http import (
    EmbeddedServer,
    InFlight,
    ServerFactory,
    exit_now,
    granian_server,
    held_port,
    wait_listening,
)

log = structlog.get_logger("aiperf.results_sidecar")

DEFAULT_PORT = 9091
DEFAULT_LINGER_S = 300.0
DEFAULT_GONE_AFTER_S = 30.0
"""How long the control plane's health port must refuse before it counts as gone: it closes
before the controller's last status push (up to 10 s), its report and the end marker."""
DEFAULT_STARTUP_BUDGET_S = 240.0
"""How long a control plane that never answered may take (its own startup probe allows 180 s)."""
DEFAULT_WAIT_FOR_S = 60.0
"""The longest wait for `--wait-for` markers once the run has ended."""


def read_run_end(artifact_dir: Path) -> RunEnd | None:
    """The run's end from the end marker in `artifact_dir`, or None while it has none (a marker
    that is not a JSON object counts as none: it is written atomically, so that is not ours)."""
    end = _read_json(artifact_dir / END_MARKER)
    if end is None:
        return None
    code = end.get("exit_code")
    return _with_ready(artifact_dir, RunEnd(how="marker", state=str(end.get("state") or "") or None,
                                            exit_code=code if isinstance(code, int) else None,
                                            reason=str(end.get("reason") or "")))


def _with_ready(artifact_dir: Path, end: RunEnd) -> RunEnd:
    ready = _read_json(artifact_dir / READY_MARKER)
    if ready is None or ready.get("ready") is not True:
        return end
    return RunEnd(how=end.how, state=end.state, exit_code=end.exit_code, reason=end.reason, results_ready=True,
                  was_cancelled=ready.get("was_cancelled") is True, partial=ready.get("partial") is True)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class ResultsServer:
    """Serves `artifact_dir` on `host:port` (0: a free port) until shut down or `linger_s` after
    the run's end (see the module doc); `run` returns then. `end` is the run's end once known.
    `controller_port` None: only the end marker tells the end (local use, tests)."""

    def __init__(self, *, artifact_dir: Path, host: str, port: int, controller_port: int | None,
                 linger_s: float, server_factory: ServerFactory = granian_server, poll_s: float = 1.0,
                 gone_after_s: float = DEFAULT_GONE_AFTER_S,
                 startup_budget_s: float = DEFAULT_STARTUP_BUDGET_S, ready_timeout_s: float = 10.0,
                 drain_timeout_s: float = 2.0, wait_for: tuple[str, ...] = (),
                 wait_for_s: float = DEFAULT_WAIT_FOR_S) -> None:
        self._dir, self._host, self._port, self._controller_port = artifact_dir, host, port, controller_port
        self._linger_s, self._factory, self._poll_s = linger_s, server_factory, poll_s
        self._gone_after_s, self._startup_budget_s = gone_after_s, startup_budget_s
        self._ready_timeout_s, self._drain_timeout_s = ready_timeout_s, drain_timeout_s
        self._wait_for, self._wait_for_s = wait_for, wait_for_s
        self.end: RunEnd | None = None
        self.url: str | None = None
        self._ended = anyio.Event()
        self._shutdown = anyio.Event()
        self._stopping = False

    def current_end(self) -> RunEnd | None:
        """`end`; a `controller-gone` end is replaced by the end marker if one appeared since (a
        control plane slower to write it than `gone_after_s`)."""
        if self.end is not None and self.end.how == "controller-gone":
            self.end = read_run_end(self._dir) or self.end
        return self.end

    def shutdown(self, reason: str = "requested") -> None:
        """Ask `run` to stop serving and return (idempotent; callable from the serving loop)."""
        if not self._shutdown.is_set():
            log.info("results.shutdown", reason=reason)
            self._shutdown.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve (started once it accepts connections) until shut down; `TimeoutError` when it does
        not listen within `ready_timeout_s`, granian's error when it cannot bind."""
        connect_host = "127.0.0.1" if self._host in ("0.0.0.0", "") else self._host
        in_flight = InFlight(create_results_app(artifact_dir=self._dir, run_end=self.current_end,
                                                shutdown=self.shutdown))
        with held_port(self._host, self._port) as port:
            await self._run_on(port, connect_host, in_flight, task_status)

    async def _run_on(self, port: int, connect_host: str, in_flight: InFlight,
                      task_status: TaskStatus[None]) -> None:
        server = self._factory(in_flight, self._host, port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._serve, server)
            try:
                await wait_listening(connect_host, port, self._ready_timeout_s)
                self.url = f"http://{connect_host}:{port}"
                log.info("results.listening", url=self.url, artifact_dir=str(self._dir))
                task_status.started()
                tg.start_soon(self._watch)
                tg.start_soon(self._linger)
                await self._shutdown.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    self._stopping = True
                    if in_flight.count:  # the shutdown request itself, a download finishing
                        with anyio.move_on_after(self._drain_timeout_s):
                            await in_flight.wait_idle()
                    server.stop()
                tg.cancel_scope.cancel()

    async def _serve(self, server: EmbeddedServer) -> None:
        with anyio.CancelScope(shield=True):  # granian must run its own shutdown to the end
            await server.serve()
        if not self._stopping:
            raise RuntimeError("the results HTTP server stopped on its own")

    async def _watch(self) -> None:
        start = anyio.current_time()
        seen_up, down_since = False, None
        while (end := read_run_end(self._dir)) is None:
            if self._controller_port is not None:
                now = anyio.current_time()
                if await self._controller_answers():
                    seen_up, down_since = True, None
                else:
                    down_since = now if down_since is None else down_since
                    if seen_up and now - down_since >= self._gone_after_s:
                        end = RunEnd(how="controller-gone", reason="the control plane exited without an end marker")
                    elif not seen_up and now - start >= self._startup_budget_s:
                        end = RunEnd(how="controller-gone",
                                     reason=f"the control plane never answered within {self._startup_budget_s:g} s")
                    if end is not None:
                        end = _with_ready(self._dir, end)
                        break
            await anyio.sleep(self._poll_s)
        await self._await_markers()
        self.end = end
        log.info("results.run_ended", how=end.how, state=end.state, exit_code=end.exit_code,
                 results_ready=end.results_ready, linger_s=self._linger_s)
        self._ended.set()

    async def _await_markers(self) -> None:
        """Wait until every `wait_for` marker is in the artifact directory, at most `wait_for_s`."""
        deadline = anyio.current_time() + self._wait_for_s
        while missing := [m for m in self._wait_for if not (self._dir / m).exists()]:
            if anyio.current_time() >= deadline:
                log.warning("results.markers_missing", markers=missing, waited_s=self._wait_for_s)
                return
            await anyio.sleep(self._poll_s)

    async def _controller_answers(self) -> bool:
        try:
            with anyio.fail_after(2):
                stream = await anyio.connect_tcp("127.0.0.1", self._controller_port or 0)
        except (OSError, TimeoutError):
            return False
        await stream.aclose()
        return True

    async def _linger(self) -> None:
        await self._ended.wait()
        await anyio.sleep(self._linger_s)
        self.shutdown(f"linger time of {self._linger_s:g} s after the run's end is over")


def build_parser() -> argparse.ArgumentParser:
    """The sidecar's flags."""
    parser = argparse.ArgumentParser(prog="results-sidecar", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact-dir", required=True, help="the run's artifact directory (read-only)")
    parser.add_argument("--host", default="0.0.0.0", help="bind host (default all interfaces)")  # noqa: S104
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--controller-health-port", type=int, default=None,
                        help="the control plane's health port on 127.0.0.1 (unset: only the end marker counts)")
    parser.add_argument("--linger-s", type=float, default=DEFAULT_LINGER_S,
                        help=f"seconds to keep serving after the run's end (default {DEFAULT_LINGER_S:g})")
    parser.add_argument("--wait-for", action="append", default=[], metavar="MARKER",
                        help="a marker file that must also be in the artifact directory before the run's files "
                             "are served (repeatable)")
    parser.add_argument("--wait-for-s", type=float, default=DEFAULT_WAIT_FOR_S,
                        help=f"the longest wait for those markers after the run's end (default {DEFAULT_WAIT_FOR_S:g})")
    parser.add_argument("--gone-after-s", type=float, default=DEFAULT_GONE_AFTER_S, help=argparse.SUPPRESS)
    parser.add_argument("--poll-s", type=float, default=1.0, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the results sidecar (see the module doc); 0 after a shutdown or the linger time."""
    args = build_parser().parse_args(argv)
    configure_logging(service_id="results-sidecar")
    server = ResultsServer(artifact_dir=Path(args.artifact_dir), host=args.host, port=args.port,
                           controller_port=args.controller_health_port, linger_s=args.linger_s,
                           gone_after_s=args.gone_after_s, poll_s=args.poll_s, wait_for=tuple(args.wait_for),
                           wait_for_s=args.wait_for_s)

    async def on_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                server.shutdown(signal.Signals(signum).name)

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_signals)
            if port := os.environ.get(HEALTH_PORT_ENV):
                probe = HealthServer(lambda: Health(alive=True, ready=server.url is not None), port=int(port))
                await tg.start(probe.run)
            await server.run()
            tg.cancel_scope.cancel()

    try:
        anyio.run(go)
    except Exception as group:
        exc = root_cause(group)
        if not isinstance(exc, OSError | RuntimeError | TimeoutError):  # granian: RuntimeError("... os error 98")
            raise
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: results sidecar cannot serve on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return EXIT_FAILED
    log.info("results.stopped")
    return EXIT_OK


def run() -> NoReturn:
    """The process entry point (the pex's): `main`, then leave without tearing the interpreter
    down (`aiperf.runtime.http.exit_now`)."""
    exit_now(main())


if __name__ == "__main__":
    run()
