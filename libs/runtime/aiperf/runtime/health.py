"""Health endpoints of a service container (Kubernetes probes), on `AIPERF_HEALTH_PORT`.

`GET /healthz` (liveness) answers 200 while the service's event loop runs and the service has
not failed: a wedged loop cannot answer, so the kubelet restarts or fails the container.
`GET /readyz` (readiness) answers 200 once the service is registered with the controller and
running, 503 before and after. Anything else is 404. Minimal HTTP/1.0 on asyncio streams: no
framework, nothing on the hot path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import structlog
from anyio.abc import TaskStatus

log = structlog.get_logger("aiperf.runtime.health")

HEALTH_PORT_ENV = "AIPERF_HEALTH_PORT"


@dataclass(frozen=True)
class Health:
    """What the probes report: `alive` (not failed) and `ready` (registered and running)."""

    alive: bool
    ready: bool


def _response(status: int, reason: str, body: str) -> bytes:
    payload = body.encode()
    head = (f"HTTP/1.0 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode() + payload


class HealthServer:
    """Serves `/healthz` and `/readyz` from `probe()` on `host:port` (port 0: a free one, see
    `port` once started)."""

    def __init__(self, probe: Callable[[], Health], *, host: str = "0.0.0.0", port: int) -> None:
        self._probe, self._host, self.port = probe, host, port

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; started once bound."""
        server = await asyncio.start_server(self._serve, self._host, self.port)
        self.port = server.sockets[0].getsockname()[1]
        try:
            task_status.started()
            await anyio.sleep_forever()
        finally:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            with anyio.move_on_after(5):
                line = await reader.readline()
                parts = line.decode("latin-1").split()
                path = parts[1] if len(parts) >= 2 else ""
                health = self._probe()
                if path == "/healthz":
                    ok = health.alive
                elif path == "/readyz":
                    ok = health.alive and health.ready
                else:
                    writer.write(_response(404, "Not Found", "unknown path\n"))
                    await writer.drain()
                    return
                writer.write(_response(200, "OK", "ok\n") if ok else
                             _response(503, "Service Unavailable", "not ready\n" if health.alive else "failed\n"))
                await writer.drain()
        except (ConnectionError, UnicodeDecodeError) as exc:  # a prober that hung up: nothing to do
            log.debug("health.client_gone", error=str(exc))
        finally:
            writer.close()


__all__ = ["HEALTH_PORT_ENV", "Health", "HealthServer"]
