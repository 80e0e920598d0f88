"""Entry point of the api process: `python -m aiperf.api.main --help`.

Listens on `AIPERF_API_PORT` if set, else 9090 in Kubernetes and a free port locally (logged as
``api.listening``); `AIPERF_API_HOST` overrides the bind host (Kubernetes: all interfaces,
locally: loopback).
"""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import NoReturn

from aiperf.api.service import Api
from aiperf.comms import CONTROLLER_HOST_ENV, RAW_UPLOAD_TOKEN, Channel, Subscriber, curve_of
from aiperf.config import RunConfig
from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, UserError, service_main
from aiperf.runtime.http import exit_now, granian_server

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


def main(argv: list[str] | None = None) -> int:
    """Run one api process; see `--help`."""
    return service_main(ServiceType.API, build, sys.argv[1:] if argv is None else argv)


def run() -> NoReturn:
    """The process entry point (the pex's, and `python -m aiperf.api.main`): `main`, then leave
    without tearing the interpreter down (`aiperf.runtime.http.exit_now`)."""
    exit_now(main())


if __name__ == "__main__":
    run()
