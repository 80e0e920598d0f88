"""structlog set-up: JSON lines when stderr is not a TTY, pretty console output when it is."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service_id)
