"""Helpers for tests that need a real mock server: a subprocess handle and SSE parsing.

Used by this package's tests and meant for end-to-end tests elsewhere in the repo::

    with running_mock("--ttft-ms", "20") as server:
        ...  # talk to server.url

The child gets ``PYTHONPATH`` from the parent's ``sys.path``, so it imports the same code.
Readiness is a poll of ``GET /health`` against a deadline, never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A free TCP port on 127.0.0.1 kept for a server started within the block: the picking
    socket stays bound (SO_REUSEADDR, never listening), so another test's server or an outgoing
    connection cannot take the port first, while a server binding with SO_REUSEADDR (granian,
    asyncio's) still can."""
    with socket.socket() as hold:
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind(("127.0.0.1", 0))
        yield int(hold.getsockname()[1])


def child_env() -> dict[str, str]:
    """This process's environment with ``PYTHONPATH`` set to its ``sys.path``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def timeout_scale() -> float:
    """``AIPERF_TEST_TIMEOUT_SCALE`` (default 1): multiplies every deadline here on slow machines."""
    try:
        return max(float(os.environ.get("AIPERF_TEST_TIMEOUT_SCALE", "1") or 1), 0.1)
    except ValueError:
        return 1.0


class MockProcess:
    """``python -m aiperf.mock_server.main --port <free> *flags`` as a child process.

    :meth:`start` blocks until ``/health`` answers 200 (or raises ``RuntimeError`` with the child's
    stderr); :meth:`stop` signals, waits, and closes the pipes, returning the exit code.
    """

    def __init__(self, *flags: str) -> None:
        self._holding = contextlib.ExitStack()  # the port, until the child listens (`start`)
        self.port = self._holding.enter_context(held_port())
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, "-m", "aiperf.mock_server.main", "--port", str(self.port), *flags]
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = b""

    def start(self, deadline_s: float = 30.0) -> MockProcess:
        """Spawn and wait for health; returns ``self``. Blocks up to ``deadline_s`` (scaled)."""
        # Own session, so a forced stop can kill the supervisor and every worker as one group.
        with self._holding:
            self.proc = subprocess.Popen(self.cmd, env=child_env(), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, start_new_session=True)
            deadline = time.monotonic() + deadline_s * timeout_scale()
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"mock server exited early: {self.stderr.decode(errors='replace')}")
                if self.healthy():
                    return self
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"mock server not healthy within {deadline_s}s: "
                           f"{self.stderr.decode(errors='replace')}")

    def healthy(self) -> bool:
        """One ``GET /health`` probe; ``False`` on any connection error."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    @property
    def running(self) -> bool:
        """Whether the child was started and has not been reaped."""
        return self.proc is not None and self.proc.returncode is None

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int:
        """Send ``sig``, wait; after ``timeout_s`` SIGKILL the whole process group. Keeps stderr.

        Returns the supervisor's exit code (negative for a signal, as ``subprocess`` reports it).
        """
        if self.proc is None:
            raise RuntimeError("stop() before start()")
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout_s * timeout_scale())
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            _, err = self.proc.communicate(timeout=10)
        self.stderr = err or b""
        return self.proc.returncode


@contextlib.contextmanager
def running_mock(*flags: str) -> Iterator[MockProcess]:
    """A started :class:`MockProcess` for the ``with`` block; stopped (SIGTERM) on exit."""
    server = MockProcess(*flags).start()
    try:
        yield server
    finally:
        if server.running:
            server.stop()


def sse_events(raw: bytes) -> list[bytes]:
    """The ``data:`` payloads of a complete SSE body, in order (``[DONE]`` included).

    Raises ``ValueError`` on an event that is not a single ``data:`` line.
    """
    events = []
    for block in raw.split(b"\n\n"):
        block = block.strip()
        if not block:
            continue
        if not block.startswith(b"data: ") or b"\n" in block:
            raise ValueError(f"not a single data: event: {block!r}")
        events.append(block[len(b"data: "):])
    return events


def sse_json(raw: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """(the JSON events decoded, the last event raw) of a complete SSE body."""
    events = sse_events(raw)
    return [orjson.loads(e) for e in events[:-1]], events[-1] if events else b""
