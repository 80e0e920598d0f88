"""HTTP API: health, progress (HTTP + WebSocket), results and dataset files.

The `Api` service follows the event bus into a `RunView` and serves it, with the run's files,
through a Litestar app on an HTTP server started on the service's own loop. The app (and
Litestar) is built at the server's first request (`aiperf.runtime.http.LazyApp`), so a run
nobody asks anything of never imports it (~0.25 s of CPU off a short run's start-up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.api.app_config import AppConfig
from aiperf.api.view import RunView
from aiperf.comms import BadMessage
from aiperf.messages import Command, Event, ProfileConfigure, Reply
from aiperf.runtime import UnknownCommand, UserError
from aiperf.runtime.http import (
    AsgiApp,
    EmbeddedServer,
    InFlight,
    LazyApp,
    ServerFactory,
    held_port,
    wait_listening,
)

log = structlog.get_logger("aiperf.api")

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


class EventSource(Protocol):
    """Where events come from (`aiperf.comms.Subscriber` in production): `recv` blocks until the
    next event, raises `BadMessage` for an undecodable one (the source stays usable) and
    `anyio.EndOfStream` when there will be no more."""

    async def recv(self) -> Event: ...


class Api:
    """Serves the run's state and files over HTTP while following the event bus.

    `run` binds `host:port` (port 0: a free port picked at start), reports started once the
    server accepts connections, applies every event to `view` until cancelled, then closes the
    WebSockets and stops the server before returning. `handle` answers `ProfileConfigure` once
    the server listens and rejects anything else. `upload_token` opens the raw-part upload
    route (`aiperf.api.raw_upload`). Construct it
    inside the event loop that runs it.
    """

    def __init__(self, *, events: EventSource, artifact_dir: Path, dataset_dir: Path,
                 compressed_dataset: bool, host: str, port: int, server_factory: ServerFactory,
                 advertise_host: str | None = None, ready_timeout_s: float = 10.0,
                 drain_timeout_s: float = 2.0, upload_token: str | None = None) -> None:
        self._events, self._host, self._port = events, host, port
        self._server_factory = server_factory
        self._advertise = advertise_host or ("127.0.0.1" if host in _WILDCARDS else host)
        self._ready_timeout_s, self._drain_timeout_s = ready_timeout_s, drain_timeout_s
        self._app_config = AppConfig(artifact_dir=artifact_dir, dataset_dir=dataset_dir,
                                     compressed_dataset=compressed_dataset, upload_token=upload_token)
        self.view = RunView()
        self.in_flight: InFlight | None = None
        self._url: str | None = None
        self._ready = anyio.Event()
        self._stopping = False

    @property
    def url(self) -> str:
        """``http://host:port`` clients use; raises `RuntimeError` before the server listens."""
        if self._url is None:
            raise RuntimeError("the api server is not listening yet")
        return self._url

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; raises `UserError` if the address cannot be bound and
        `TimeoutError` if the server does not accept connections within `ready_timeout_s`."""
        self.in_flight = in_flight = InFlight(LazyApp(self._create_app))
        with held_port(self._host, self._port) as port:
            await self._run_on(in_flight, port, task_status)

    async def _run_on(self, in_flight: InFlight, port: int, task_status: TaskStatus[None]) -> None:
        server = self._server_factory(in_flight, self._host, port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._serve, server, port)
            try:
                await wait_listening(self._connect_host, port, self._ready_timeout_s)
                self._url = f"http://{self._bracketed(self._advertise)}:{port}"
                self._ready.set()
                log.info("api.listening", url=self._url, bind=self._host, port=port)
                task_status.started()
                await self._follow_events()
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop(server)

    def _create_app(self) -> AsgiApp:
        """The Litestar app over `view` (imported here: at the first request, not at start)."""
        from aiperf.api.app import create_app

        return create_app(view=self.view, config=self._app_config)

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`ProfileConfigure`: answered once the server listens; others: `UnknownCommand`."""
        if not isinstance(command, ProfileConfigure):
            raise UnknownCommand(f"the api does not handle {type(command).__name__}")
        await self._ready.wait()
        return None

    @property
    def _connect_host(self) -> str:
        return "127.0.0.1" if self._host in _WILDCARDS else self._host

    @staticmethod
    def _bracketed(host: str) -> str:
        return f"[{host}]" if ":" in host else host

    async def _serve(self, server: EmbeddedServer, port: int) -> None:
        # Shielded: the server must run its own shutdown (stop workers, lifespan shutdown) to
        # the end; `_stop` makes `serve` return.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve()
            except (OSError, RuntimeError) as exc:
                # Granian reports a failed bind as RuntimeError("... (os error 98)\n<backtrace>").
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if isinstance(exc, RuntimeError) and "os error" not in reason:
                    raise
                raise UserError(f"api cannot listen on {self._host}:{port}: {reason}; "
                                "set AIPERF_API_PORT to a free port") from exc
            # A request the drain timed out on ends soon once its connection is gone.
            await self._drain()
        if not self._stopping:
            raise RuntimeError("the api HTTP server stopped on its own")

    async def _follow_events(self) -> None:
        while True:
            try:
                event = await self._events.recv()
            except BadMessage as exc:
                log.warning("api.bad_event", error=str(exc))
                continue
            except anyio.EndOfStream:
                log.info("api.events_ended")
                return
            self.view.apply(event)

    async def _stop(self, server: EmbeddedServer) -> None:
        """Close the WebSockets and let requests finish (up to `drain_timeout_s`), then stop
        the server. Granian neither closes WebSockets nor waits for request tasks at shutdown."""
        self._stopping = True
        self.view.close()
        await self._drain()
        server.stop()
        log.info("api.stopping")

    async def _drain(self) -> None:
        in_flight = self.in_flight
        if in_flight is not None and in_flight.count:
            with anyio.move_on_after(self._drain_timeout_s) as drain:
                await in_flight.wait_idle()
            if drain.cancelled_caught:
                log.warning("api.drain_timeout", in_flight=in_flight.count)
