"""The results server process: `results-server --base DIR [--port 8081] [--host 127.0.0.1]
[--layout auto|volume|local] [--in-cluster | --kubeconfig PATH]` (its own service and image, an
auxiliary service of the catalog: the operator Deployment's `results-server` container runs it
with `--in-cluster`; on a workstation `aiperf results serve DIR` runs it by name).

`--layout volume` serves an operator results volume through its SQLite index
(`aiperf.results.index`; the index is created or rebuilt there when missing or corrupt);
`--layout local` serves a local artifact tree read-only (`aiperf.results.local` lists the
layouts it accepts); `auto` (the default) picks `volume` when DIR holds an index or a
`<ns>/<name>/<epoch>/` run directory, else `local`. The web dashboard is served at
``/dashboard/`` (`aiperf.dashboard`, reading this server's JSON routes). With `--in-cluster`
(the pod's ServiceAccount) or `--kubeconfig PATH` (its current context) it also serves the live
status of AIPerfJobs (`aiperf.results_server.jobstatus`) and the dashboard's job page follows a running
job through it; without either those routes are absent. Granian serves the app (embedded, on
this process's event loop) until SIGINT/SIGTERM. Exit 0 after a signal, 2 for a bad flag, a
missing DIR or an unusable Kubernetes configuration (one line), 1 when it cannot listen.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog
from litestar import Litestar
from litestar.types import ControllerRouterHandler

from aiperf.dashboard import DataSource
from aiperf.dashboard import dashboard_routes as web_dashboard_routes
from aiperf.results import disk
from aiperf.results.app import ResultsSource, create_app
from aiperf.results.index import ResultsIndex, keep_from_env
from aiperf.results.keys import is_key
from aiperf.results.local import LocalTree
from aiperf.runtime.http import HttpServer

if TYPE_CHECKING:  # kubernetes_asyncio takes seconds to import: only servers given a cluster pay
    from aiperf.kubeapi import KubeApi
    from aiperf.results_server.jobstatus import JobStatusFeed

log = structlog.get_logger("aiperf.results")

PROG = "results-server"
DEFAULT_PORT = 8081
DEFAULT_HOST = "127.0.0.1"
LAYOUTS = ("auto", "volume", "local")


class UsageError(Exception):
    """A mistake in the command line the user must fix (one line, exit 2)."""


def looks_like_volume(base: Path) -> bool:
    """DIR holds an index or at least one `<ns>/<name>/<epoch>/` run directory."""
    if (base / disk.INDEX_FILE).exists():
        return True
    return any(is_key(run.name) and run.is_dir() for ns, name in disk.job_names(base)
               for run in disk.job_dir(base, ns, name).iterdir())


def open_source(base: Path, layout: str = "auto") -> ResultsSource:
    """The source serving `base` in `layout` (see the module doc). UsageError when `base` is not
    a directory, the layout is unknown or `AIPERF_RESULTS_KEEP` is invalid."""
    if layout not in LAYOUTS:
        raise UsageError(f"--layout {layout!r}: one of {', '.join(LAYOUTS)}")
    if not base.is_dir():
        raise UsageError(f"{base} is not a directory; give the results volume or an artifact directory "
                         "(e.g. artifacts/ after `aiperf demo`)")
    if layout == "local" or (layout == "auto" and not looks_like_volume(base)):
        return LocalTree(base)
    try:
        return ResultsIndex(base, keep=keep_from_env())
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def dashboard_routes(*, live: bool = False) -> list[ControllerRouterHandler]:
    """The web dashboard (`aiperf.dashboard`) at ``/dashboard/``, reading this server's routes;
    `live`: its job page follows the job status routes (socket, polling when it drops)."""
    source = DataSource()
    if live:
        from aiperf.results_server.jobstatus import SOCKET_PATH, STATUS_PATH

        source = DataSource(status_url=STATUS_PATH, progress_ws_url=SOCKET_PATH)
    return list(web_dashboard_routes(source=source, path="/dashboard"))


def build_app(base: Path, layout: str = "auto", *, feed: JobStatusFeed | None = None) -> Litestar:
    """The results app over `base` with the dashboard, and the job status routes over `feed`
    when given (UsageError: see `open_source`)."""
    return app_over(open_source(base, layout), feed=feed)


def app_over(source: ResultsSource, *, feed: JobStatusFeed | None = None) -> Litestar:
    """The results app over `source` (see `build_app`)."""
    extra = dashboard_routes(live=feed is not None)
    if feed is not None:
        from aiperf.results_server.jobstatus import job_status_routes

        extra = [*job_status_routes(feed), *extra]
    return create_app(source, extra_route_handlers=extra, live_progress=feed.progress if feed is not None else None)


async def connect_kube(*, in_cluster: bool, kubeconfig: str | None) -> KubeApi | None:
    """The API client the flags ask for (None for neither); the caller closes it. UsageError
    (one line) when it cannot be configured."""
    from aiperf.kubeapi import KubeError, client_of, connect, load_configuration

    if in_cluster:
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise UsageError("--in-cluster: not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set); "
                             "use --kubeconfig PATH outside a cluster")
        try:
            return client_of(await load_configuration(None))
        except KubeError as exc:
            raise UsageError(f"--in-cluster: {exc}") from None
    if kubeconfig is not None:
        try:
            return await connect(kubeconfig, None)
        except KubeError as exc:
            raise UsageError(str(exc)) from None
    return None


async def serve(app: Litestar, *, host: str, port: int, announce: str = "",
                drain: Callable[[], Awaitable[None]] | None = None) -> None:
    """Serve `app` until SIGINT/SIGTERM (see `HttpServer`, `drain` too); print `announce` + the
    URL once up."""
    server = HttpServer(app, host=host, port=port, drain=drain)
    async with anyio.create_task_group() as tg:
        async def on_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("results.stopping", signal=signal.Signals(signum).name)
                    server.stop()

        tg.start_soon(on_signals)
        async with anyio.create_task_group() as serving:
            await serving.start(server.run)
            print(f"{announce}{server.url}/ (Ctrl-C stops)", flush=True)
            log.info("results.listening", url=server.url)
        tg.cancel_scope.cancel()


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The results server's command line."""
    return serve_flags(argparse.ArgumentParser(prog=prog, description=__doc__,
                                               formatter_class=argparse.RawDescriptionHelpFormatter))


def serve_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--base", required=True, metavar="DIR", help="results volume or local artifact directory")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"bind address (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--layout", choices=LAYOUTS, default="auto", help="how DIR is laid out (default auto)")
    kube = parser.add_mutually_exclusive_group()
    kube.add_argument("--in-cluster", action="store_true",
                      help="serve live AIPerfJob status, reading the API server as this pod's ServiceAccount")
    kube.add_argument("--kubeconfig", metavar="PATH", default=None,
                      help="serve live AIPerfJob status, reading the cluster of PATH's current context")
    return parser


def run_server(base: Path, *, host: str, port: int, layout: str = "auto", in_cluster: bool = False,
               kubeconfig: str | None = None) -> int:
    """Build and serve (see the module doc for the exit codes)."""
    try:
        source = open_source(base, layout)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not 0 <= port <= 65535:
        print(f"error: --port {port} is not a TCP port (0..65535)", file=sys.stderr)
        return 2

    async def main() -> None:
        async with AsyncExitStack() as stack:
            api = await connect_kube(in_cluster=in_cluster, kubeconfig=kubeconfig)
            feed = None
            if api is not None:
                from aiperf.results_server.jobstatus import JobStatusFeed

                await stack.enter_async_context(api)
                feed = JobStatusFeed(api=api)
            await serve(app_over(source, feed=feed), host=host, port=port,
                        announce=f"serving the results in {base} at ", drain=feed.close if feed else None)

    try:
        anyio.run(main)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as group:  # noqa: BLE001 - reduced to one line below or re-raised
        cause: BaseException = group
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        if not isinstance(cause, OSError | RuntimeError | TimeoutError):
            raise
        reason = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        print(f"error: cannot serve on {host}:{port}: {reason}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`results-server --base DIR ...` (see the module doc)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    return run_server(Path(args.base), host=args.host, port=args.port, layout=args.layout,
                      in_cluster=args.in_cluster, kubeconfig=args.kubeconfig)


__all__ = ["DEFAULT_PORT", "UsageError", "app_over", "build_app", "connect_kube", "main", "open_source", "run_server",
           "serve", "serve_flags"]


if __name__ == "__main__":
    sys.exit(main())
