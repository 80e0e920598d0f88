"""A run's export files over HTTP, safely: which names are served, with which media types, and
the one check every route that serves a file by name makes (`existing_file`). Shared by the api
service and the results sidecar."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import structlog
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.types import Scope

SUMMARY_JSON = "profile_export_aiperf.json"
EXPORT_FILES = frozenset({SUMMARY_JSON, "profile_export_aiperf.csv", "profile_export.jsonl", "inputs.json",
                          "profile_export_console.txt", "profile_export_raw.jsonl", "server_metrics_export.json",
                          "server_metrics_export.csv", "profile_export_aiperf_timeslices.json",
                          "profile_export_aiperf_timeslices.csv", "gpu_telemetry_export.jsonl"})
"""The export files of a run a server may serve; any other name is refused."""
MEDIA_TYPES = {".json": "application/json", ".csv": "text/csv", ".jsonl": "application/x-ndjson",
               ".txt": "text/plain; charset=utf-8"}
"""The media type of an export file, by its suffix."""


def check_name(name: str, allowed: frozenset[str]) -> None:
    """Refuse anything that is not one plain allowed file name (no separators, no dot-dot):
    422 for a malformed name, 404 for one not allowed."""
    if "/" in name or "\\" in name or name.startswith(".") or "\x00" in name:
        raise ValidationException(detail=f"invalid file name {name!r}")
    if name not in allowed:
        raise NotFoundException(detail=f"unknown file {name!r}; one of {sorted(allowed)}")


async def existing_file(folder: Path, name: str, allowed: frozenset[str]) -> Path:
    """`folder/name` if `name` is allowed and the file exists inside `folder` (symlinks out of
    `folder` are refused); else an HTTP error."""
    check_name(name, allowed)
    root = await anyio.Path(folder).resolve()
    path = await (root / name).resolve()
    if path.parent != root:
        raise ValidationException(detail=f"invalid file name {name!r}")
    if not await path.is_file():
        raise NotFoundException(detail=f"{name} not written yet")
    return Path(path)


def unexpected_logger(event: str) -> Callable[[Exception, Scope], Awaitable[None]]:
    """A Litestar `after_exception` hook logging `event` (at error, with the traceback) for an
    exception that is not an HTTP answer: a bug of ours, not the client's."""
    log = structlog.get_logger("aiperf.results.files")

    async def log_unexpected(exc: Exception, scope: Scope) -> None:  # async: Litestar would use a thread
        if not isinstance(exc, HTTPException):
            log.error(event, path=scope.get("path"), error=f"{type(exc).__name__}: {exc}", exc_info=exc)

    return log_unexpected


__all__ = ["EXPORT_FILES", "MEDIA_TYPES", "SUMMARY_JSON", "check_name", "existing_file", "unexpected_logger"]
