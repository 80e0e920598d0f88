"""Serving an ASGI app over HTTP from a service (the api, the results sidecar, the results
server): granian's embedded server, the port it binds, requests in flight, readiness.

Granian's embedded server runs the ASGI app as tasks of the calling asyncio loop; its Rust
runtime owns the listening socket. `serve()` returns after `stop()`. `EmbeddedServer` is the
port a service is given (tests inject their own); `HttpServer` is the whole lifecycle for a
process that only serves: pick and hold a port, listen, report ready, drain, stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, NoReturn, Protocol

import anyio
from anyio.abc import TaskStatus
from granian.constants import Interfaces
from granian.log import LogLevels
from granian.server.embed import Server


class AsgiApp(Protocol):
    """An ASGI 3 application (HTTP, WebSocket and lifespan scopes)."""

    def __call__(self, scope: Any, receive: Any, send: Any) -> Awaitable[None]: ...


class EmbeddedServer(Protocol):
    """One HTTP server serving one app: `serve` runs until `stop` is called (it may be called
    before `serve` starts, from the same loop) and raises if the server cannot start."""

    async def serve(self) -> Any: ...

    def stop(self) -> Any: ...


ServerFactory = Callable[[AsgiApp, str, int], EmbeddedServer]
"""``factory(app, host, port)``: a not yet started server for `app` on `host:port`."""

_STDERR_LOGGING: dict[str, Any] = {
    "handlers": {
        "console": {"formatter": "generic", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
        "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
    },
}


def granian_server(app: AsgiApp, host: str, port: int) -> EmbeddedServer:
    """Granian's embedded server for `app` on `host:port` (ASGI with lifespan, WebSockets on,
    HTTP/1 and HTTP/2). Its own logs go to stderr (stdout stays free) at level error: the
    "embedded server is experimental" warning would print on every start."""
    return Server(target=app, interface=Interfaces.ASGI, address=host, port=port, websockets=True,
                  log_level=LogLevels.error, log_dictconfig=_STDERR_LOGGING)


@contextlib.contextmanager
def held_port(host: str, port: int = 0) -> Iterator[int]:
    """`port`, or for 0 a TCP port on `host` that stays free for the server about to bind it.

    Granian cannot be asked for port 0 (it checks the address with a throwaway bind and binds
    again in its worker, so the port it ends up on is unknown to the caller): the caller names
    one. A port picked and closed again could be taken before granian binds it (another
    server's bind, an outgoing connection's local port: "address in use" under a busy test
    suite). So the picking socket stays bound, with SO_REUSEADDR and never listening, for the
    body: other binds and outgoing connections keep off the port while granian, which binds
    with SO_REUSEADDR too, binds and listens on it."""
    if port:
        yield port
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as hold:
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind((host, 0))
        yield hold.getsockname()[1]


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that is free right now and not held (a test's fixed port; a server
    that picks its own uses `held_port`)."""
    with held_port(host) as port:
        return port


class InFlight:
    """ASGI wrapper counting the HTTP requests and WebSockets being handled.

    Granian's embedded `stop()` does not wait for request tasks still running on the loop (a
    file response finishing its last chunk, a WebSocket handler): the service waits for
    `wait_idle` before stopping the server, so no request task outlives the service.
    """

    def __init__(self, app: AsgiApp) -> None:
        self._app = app
        self.count = 0
        self._idle: anyio.Event | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        self.count += 1
        try:
            await self._app(scope, receive, send)
        finally:
            self.count -= 1
            if self.count == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def wait_idle(self) -> None:
        """Block until no request or WebSocket is being handled."""
        while self.count:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()


class LazyApp:
    """ASGI app built by `factory` at its first HTTP request or WebSocket, not before.

    For an app whose import is costly (the api's Litestar app: ~0.25 s of CPU) in a process
    that may never be asked anything (a short local run): the server listens at once, and the
    first request waits for the build (on the loop, once; a failed build is retried by the next
    request). The lifespan scope is answered here, without building: the wrapped app's own
    startup and shutdown hooks never run, so wrap only an app that has none.
    """

    def __init__(self, factory: Callable[[], AsgiApp]) -> None:
        self._factory = factory
        self._app: AsgiApp | None = None

    @property
    def built(self) -> bool:
        """Whether the first request has built the app."""
        return self._app is not None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _answer_lifespan(receive, send)
            return
        if self._app is None:
            self._app = self._factory()
        await self._app(scope, receive, send)


async def _answer_lifespan(receive: Any, send: Any) -> None:
    """The ASGI lifespan protocol of an app with nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def wait_listening(host: str, port: int, timeout_s: float) -> None:
    """Return once `host:port` accepts a TCP connection; `TimeoutError` after `timeout_s`."""
    with anyio.fail_after(timeout_s):
        while True:
            try:
                stream = await anyio.connect_tcp(host, port)
            except OSError:
                await anyio.sleep(0.01)  # the worker binds shortly after serve() starts
                continue
            await stream.aclose()
            return


class HttpServer:
    """Granian (embedded) serving `app` on `host:port` until `stop()`; `run` is started once the
    port accepts connections. `url` is where to reach it then. `drain` (optional) is awaited
    before granian stops, up to `drain_timeout_s`: granian's embedded stop does not wait for
    handlers still running (open WebSockets), so `drain` ends them first. Port 0: a free one,
    held (`held_port`) until `run` returns."""

    def __init__(self, app: AsgiApp, *, host: str, port: int, ready_timeout_s: float = 15.0,
                 drain: Callable[[], Awaitable[None]] | None = None, drain_timeout_s: float = 10.0) -> None:
        self._holding = contextlib.ExitStack()
        port = self._holding.enter_context(held_port(host, port))
        self._server = granian_server(app, host, port)
        self._host, self._port, self._timeout = host, port, ready_timeout_s
        self._drain, self._drain_timeout = drain, drain_timeout_s
        self._stop = anyio.Event()
        connect = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)  # noqa: S104
        self.url = f"http://{connect}:{port}" if ":" not in connect else f"http://[{connect}]:{port}"
        self._connect = connect

    def stop(self) -> None:
        """Ask `run` to stop the server and return (idempotent)."""
        self._stop.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()` (once); TimeoutError when it does not listen within the ready
        timeout, granian's RuntimeError when it cannot bind."""
        with self._holding:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._serve)
                try:
                    await wait_listening(self._connect, self._port, self._timeout)
                    task_status.started()
                    await self._stop.wait()
                finally:
                    with anyio.CancelScope(shield=True):
                        if self._drain is not None:
                            with anyio.move_on_after(self._drain_timeout):
                                await self._drain()
                        self._server.stop()

    async def _serve(self) -> None:
        with anyio.CancelScope(shield=True):  # granian runs its own shutdown to the end
            await self._server.serve()
        if not self._stop.is_set():
            raise RuntimeError(f"the HTTP server on {self._host}:{self._port} stopped on its own")


def exit_now(code: int) -> NoReturn:
    """Leave the process with `code` without tearing the interpreter down (logs and standard
    streams flushed first). Granian's Rust threads can outlive its stop; a teardown under them
    crashed servers after a clean shutdown ("panic in a function that cannot unwind", exit
    134/139). Nothing is left to clean up by then (a service forked by the zygote ends the same
    way, see aiperf.runtime.zygote)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


__all__ = ["AsgiApp", "EmbeddedServer", "HttpServer", "InFlight", "LazyApp", "ServerFactory", "exit_now",
           "free_tcp_port", "granian_server", "held_port", "wait_listening"]
