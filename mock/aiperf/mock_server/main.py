"""Command line of the mock server: ``python -m aiperf.mock_server.main [flags]``.

``main(argv)`` parses flags, checks the port is free, creates the shared counter file, and runs
granian (one supervisor process plus ``--workers`` worker processes, each importing
:func:`aiperf.mock_server.app.app_from_env`). It blocks until SIGINT or SIGTERM, then returns 0.
A bad flag or an unusable address is one line on stderr and exit code 2.

The main ``aiperf`` CLI mounts this as ``aiperf mock-server`` by calling :func:`main` with the
remaining argv; :func:`build_parser` is public for help text and completion.
"""

from __future__ import annotations

import argparse
import errno
import os
import resource
import socket
import sys
import tempfile
from collections.abc import Sequence
from typing import NoReturn

import msgspec

from aiperf.mock_server.config import CONFIG_ENV, DEFAULT_MODEL, MockConfig
from aiperf.mock_server.faults import Fault

PROG = "aiperf mock-server"
APP_FACTORY = "aiperf.mock_server.app:app_from_env"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
WORKER_KILL_TIMEOUT_S = 3


class UsageError(Exception):
    """A user mistake in the flags; ``main`` prints it as one line and exits 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``aiperf mock-server``; its ``error`` raises :class:`UsageError`."""
    p = _Parser(prog=PROG, description="Mock OpenAI-compatible LLM server with exact, configurable timing.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--ttft-ms", type=float, default=0.0, help="time to first token, ms (default 0)")
    p.add_argument("--itl-ms", type=float, default=0.0, help="inter-token latency, ms (default 0)")
    p.add_argument("--jitter-ms", type=float, default=0.0,
                   help="uniform +-jitter added to every delay, clamped at 0 (default 0)")
    p.add_argument("--output-tokens", type=int, default=None,
                   help="fixed output length for every request, overriding max_tokens "
                        "(default: follow the request)")
    p.add_argument("--default-output-tokens", type=int, default=64,
                   help="output length when the request sets no max_tokens (default 64)")
    p.add_argument("--error-rate", type=float, default=0.0,
                   help="fraction 0..1 of inference requests answered with HTTP 500 (default 0)")
    p.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    p.add_argument("--seed", type=int, default=None, help="seed for injected errors and jitter")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"model id listed by /v1/models (default {DEFAULT_MODEL})")
    p.add_argument("--embedding-dim", type=int, default=768, help="embedding vector length (default 768)")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                   help="granian log level (default warning)")
    p.add_argument("--headers-delay-ms", type=float, default=0.0,
                   help="hold the response headers (the first byte) of inference requests this long, ms "
                        "(default 0)")
    p.add_argument("--close-connections", action="store_true",
                   help="answer with Connection: close, so every request opens a fresh connection")
    p.add_argument("--fault", choices=[f.value for f in Fault], default=None,
                   help="answer inference requests like a broken server: reset (connection dropped "
                        "mid-body), hang-headers, hang-stream, trickle (one byte per --trickle-ms), "
                        "endless (a stream that never ends), malformed-sse, invalid-utf8, huge-event "
                        "(one 8 MiB event), huge-word (one 8 MiB event of a single word)")
    p.add_argument("--fault-rate", type=float, default=1.0,
                   help="share of inference requests that get the --fault (default 1)")
    p.add_argument("--trickle-ms", type=float, default=1000.0,
                   help="ms between the bytes of --fault trickle (default 1000)")
    p.add_argument("--wire-stats", action="store_true",
                   help="count the bytes on the wire of inference connections (/stats wire_bytes_in/out) "
                        "through a relay in front of the app (one extra loopback hop)")
    return p


def parse_config(argv: Sequence[str] | None = None) -> MockConfig:
    """Parse and validate flags. Raises :class:`UsageError` naming the bad flag."""
    ns = build_parser().parse_args(argv)
    checks = (
        (1 <= ns.port <= 65535, "--port must be 1..65535"),
        (ns.ttft_ms >= 0, "--ttft-ms must be >= 0"),
        (ns.itl_ms >= 0, "--itl-ms must be >= 0"),
        (ns.jitter_ms >= 0, "--jitter-ms must be >= 0"),
        (ns.output_tokens is None or ns.output_tokens >= 0, "--output-tokens must be >= 0"),
        (ns.default_output_tokens >= 0, "--default-output-tokens must be >= 0"),
        (0.0 <= ns.error_rate <= 1.0, "--error-rate must be a fraction between 0 and 1"),
        (ns.workers >= 1, "--workers must be >= 1"),
        (ns.embedding_dim >= 1, "--embedding-dim must be >= 1"),
        (bool(ns.model), "--model must not be empty"),
        (ns.headers_delay_ms >= 0, "--headers-delay-ms must be >= 0"),
        (0.0 <= ns.fault_rate <= 1.0, "--fault-rate must be a fraction between 0 and 1"),
        (ns.trickle_ms > 0, "--trickle-ms must be > 0"),
    )
    for ok, problem in checks:
        if not ok:
            raise UsageError(problem)
    return MockConfig(
        host=ns.host, port=ns.port, ttft_ms=ns.ttft_ms, itl_ms=ns.itl_ms, jitter_ms=ns.jitter_ms,
        output_tokens=ns.output_tokens, default_output_tokens=ns.default_output_tokens,
        error_rate=ns.error_rate, workers=ns.workers, seed=ns.seed, model=ns.model,
        embedding_dim=ns.embedding_dim, log_level=ns.log_level, headers_delay_ms=ns.headers_delay_ms,
        close_connections=ns.close_connections, wire_stats=ns.wire_stats, fault=ns.fault,
        fault_rate=ns.fault_rate, trickle_ms=ns.trickle_ms,
    )


def check_bindable(host: str, port: int) -> None:
    """Raise :class:`UsageError` when ``host:port`` cannot be bound (in use, bad address)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host!r} does not resolve: {exc.strerror}") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(f"port {port} on {host} is already in use; pick another --port") from None
            raise UsageError(f"cannot bind {host}:{port}: {exc.strerror}") from None


MAX_CONNECTIONS_PER_WORKER = 1 << 16
"""Granian's `backpressure`: connections one mock process serves at once. Its default, backlog /
workers (2,048 with 2 processes), left a c=15,000 client's other connections in the listen queue
until it overflowed (handshakes dropped, requests timing out after minutes)."""


def serve(config: MockConfig) -> None:
    """Run granian with ``config`` until SIGINT/SIGTERM; blocks. Owns the shared counter file."""
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces
    from granian.log import LogLevels

    from aiperf.mock_server.stats import StatsBoard
    from aiperf.mock_server.wire import WireRelay

    _raise_open_files_limit()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, stats_path = tempfile.mkstemp(prefix="aiperf-mock-stats-", dir=shm)
    os.close(fd)
    relay: WireRelay | None = None
    address, port = config.host, config.port
    try:
        StatsBoard.create(stats_path, rows=config.workers + (1 if config.wire_stats else 0))
        if config.wire_stats:
            address, port = "127.0.0.1", _free_port()
            relay = WireRelay(host=config.host, port=config.port, app_port=port,
                              board=StatsBoard.attach(stats_path)).start()
        os.environ[CONFIG_ENV] = msgspec.structs.replace(config, stats_path=stats_path, app_port=port).to_env()
        server = Granian(
            APP_FACTORY, address=address, port=port, interface=Interfaces.ASGINL,
            workers=config.workers, factory=True, http=HTTPModes.http1, websockets=False,
            backlog=4096, backpressure=MAX_CONNECTIONS_PER_WORKER, log_level=LogLevels(config.log_level), log_access=False,
            # A forked worker that is signalled before it installs its own handlers still runs the
            # supervisor's (flag-setting) handler and would ignore SIGTERM; kill it instead of hanging.
            workers_kill_timeout=WORKER_KILL_TIMEOUT_S,
        )
        print(f"{PROG}: serving http://{config.host}:{config.port} (workers={config.workers}, "
              f"ttft={config.ttft_ms}ms, itl={config.itl_ms}ms)", file=sys.stderr, flush=True)
        server.serve()
    finally:
        if relay is not None:
            relay.stop()
            relay.board.close()
        StatsBoard.unlink(stats_path)


def _raise_open_files_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit (at most 2**20), inherited by granian's workers: one
    descriptor per client connection, and 1024, a common soft default, is far below c=15,000."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 after a clean stop, 2 for a usage error)."""
    try:
        config = parse_config(argv)
        check_bindable(config.host, config.port)
    except UsageError as exc:
        print(f"{PROG}: error: {exc} (see --help)", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help prints and "exits" with 0
        return exc.code if isinstance(exc.code, int) else 0
    serve(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
