"""Entry point of the api process: `python -m aiperf.api.main --help`; with `serve-results`
first it runs the controller pod's results sidecar instead (`aiperf.api.results_main`).

Listens on `AIPERF_API_PORT` if set, else 9090 in Kubernetes and a free port locally (logged as
``api.listening``); `AIPERF_API_HOST` overrides the bind host (Kubernetes: all interfaces,
locally: loopback).
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import NoReturn

from aiperf.api.server import granian_server
from aiperf.api.service import Api
from aiperf.comms import CONTROLLER_HOST_ENV, RAW_UPLOAD_TOKEN, Channel, Subscriber, curve_of
from aiperf.config import RunConfig
from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, UserError, service_main

PORT_ENV = "AIPERF_API_PORT"
HOST_ENV = "AIPERF_API_HOST"
KUBERNETES_PORT = 9090


def bind_address(config: RunConfig, env: dict[str, str] | os._Environ[str]) -> tuple[str, int]:
    """``(host, port)`` to listen on; port 0 means "pick a free one". Raises `UserError` for a
    port that is not an integer in 0..65535."""
    host = env.get(HOST_ENV) or ("0.0.0.0" if config.kubernetes else "127.0.0.1")
    raw = env.get(PORT_ENV)
    if not raw:
        return host, KUBERNETES_PORT if config.kubernetes else 0
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise UserError(f"{PORT_ENV}={raw!r} is not a TCP port; set it to 0..65535 or unset it")
    return host, port


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the api: an event-bus subscriber (all topics), the run's directories, granian. In
    Kubernetes the raw-part upload route takes the token derived from the run's keys (none
    without keys: the route then refuses every upload)."""
    events = await stack.enter_async_context(Subscriber(
        ctx.zmq, connect=[ctx.addressing.connect_endpoint(Channel.EVENT_BUS_BACKEND)]))
    host, port = bind_address(ctx.config, os.environ)
    artifacts = Path(ctx.config.artifact_dir)
    keys = curve_of(ctx.zmq)
    token = keys.http_token(RAW_UPLOAD_TOKEN) if keys is not None and ctx.config.kubernetes else None
    return Api(events=events, artifact_dir=artifacts, dataset_dir=Path(ctx.config.dataset_path),
               compressed_dataset=ctx.config.kubernetes, host=host, port=port,
               server_factory=granian_server, advertise_host=os.environ.get(CONTROLLER_HOST_ENV),
               upload_token=token)


RESULTS_COMMAND = "serve-results"


def main(argv: list[str] | None = None) -> int:
    """Run one api process; see `--help` (`serve-results --help` for the results sidecar)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == [RESULTS_COMMAND]:
        from aiperf.api.results_main import main as serve_results

        return serve_results(args[1:])
    return service_main(ServiceType.API, build, args)


def run() -> NoReturn:
    """The process entry point (the pex's, and `python -m aiperf.api.main`): `main`, then leave
    without tearing the interpreter down. Granian's Rust threads can outlive its stop; a
    teardown under them crashed results sidecars after a clean shutdown ("panic in a function
    that cannot unwind", exit 134/139). Nothing is left to clean up by then (a service forked by
    the zygote ends the same way, see aiperf.runtime.zygote)."""
    exit_code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


if __name__ == "__main__":
    run()
