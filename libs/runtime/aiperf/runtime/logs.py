"""structlog set-up: JSON lines when stderr is not a TTY, pretty console output when it is."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog


class _LossyStream:
    """A log stream that drops what it cannot write: a full disk or a closed pipe under a
    service's log must not turn a log call into a crash of the service (issue 10, item 7).
    `dropped` counts the lost writes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream, self.dropped = stream, 0

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:  # ENOSPC, EPIPE, EIO: the log line is lost, the service goes on
            self.dropped += 1
            return 0

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self.dropped += 1


def configure_logging(*, service_id: str, level: str = "info", json: bool | None = None) -> None:
    """Configure structlog for this process; every event carries `service`.

    `json` None chooses by whether stderr is a TTY. Logs go to stderr so stdout stays free
    for user-facing output.
    """
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (structlog.processors.JSONRenderer() if use_json
                     else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=_LossyStream(sys.stderr)),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service_id)
