"""Kubernetes, `--export-level raw`: the worker pods' raw parts arrive at the controller pod.

At finalize each worker-group-manager `PUT`s its group's parts to ``/api/raw/<name>`` with
``Authorization: Bearer <token>``; the token is `CurveKeys.http_token(RAW_UPLOAD_TOKEN)`, derived
from the run's key Secret that every container mounts, so only the run's own pods can write.
A part is streamed to a hidden staging file beside its final name, fsynced, renamed into
`<artifact_dir>/raw/<name>` and the folder fsynced; the answer carries the byte count received,
which the sender compares with what it sent. The system-controller then joins the parts.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import structlog
from litestar.exceptions import (
    ClientException,
    NotAuthorizedException,
    PermissionDeniedException,
    ValidationException,
)

log = structlog.get_logger("aiperf.api.raw_upload")

RAW_UPLOAD_PATH = "/api/raw"
RAW_PARTS_DIR = "raw"
"""Folder of the parts under the artifact dir (where record-processors write them locally)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}\.jsonl")
"""A part's file name: a service id and `.jsonl`; no separator, no leading dot, no dot-dot."""


def check_part_name(name: str) -> None:
    """Raise `ValidationException` (400) unless `name` is one plain part file name."""
    if not _NAME.fullmatch(name):
        raise ValidationException(detail=f"invalid raw part name {name!r}: expected <service-id>.jsonl")


class RawUploads:
    """Receives raw parts into `directory`. `token` None (a run without key material, such as a
    local one) refuses every upload: the route is never open unauthenticated."""

    def __init__(self, *, directory: Path, token: str | None) -> None:
        self.directory, self._token = directory, token

    def authorize(self, authorization: str | None) -> None:
        """Raise `PermissionDeniedException` (403) when uploads are off and
        `NotAuthorizedException` (401) unless `authorization` is ``Bearer <the run's token>``
        (compared in constant time)."""
        if self._token is None:
            raise PermissionDeniedException(detail="raw uploads are off: this run has no key material")
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self._token.encode()):
            raise NotAuthorizedException(detail="raw upload refused: missing or wrong bearer token",
                                         headers={"WWW-Authenticate": "Bearer"})

    async def store(self, name: str, chunks: AsyncIterator[bytes], *, declared: int | None) -> int:
        """Write `chunks` to `<directory>/<name>` (staged, fsynced, renamed; an older copy is
        replaced, so a retried upload is harmless) and return the bytes received. Raises
        `ValidationException` for a bad name and `ClientException` (400) when the body's length
        differs from `declared` (the Content-Length); the staging file is removed on every failure."""
        check_part_name(name)
        folder = anyio.Path(self.directory)
        await folder.mkdir(parents=True, exist_ok=True)
        final = folder / name
        staging = folder / f".{name}.{secrets.token_hex(4)}.upload"
        received = 0
        try:
            async with await anyio.open_file(staging, "wb") as out:
                async for chunk in chunks:
                    received += len(chunk)
                    await out.write(chunk)
                if declared is not None and received != declared:
                    raise ClientException(detail=f"raw part {name}: {received} bytes received, "
                                                 f"Content-Length said {declared}")
                await out.flush()
                await anyio.to_thread.run_sync(os.fsync, out.wrapped.fileno())
            await staging.rename(final)
            await anyio.to_thread.run_sync(_fsync_dir, self.directory)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await staging.unlink(missing_ok=True)
            raise
        log.info("api.raw_part_received", name=name, size=received)
        return received


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["RAW_PARTS_DIR", "RAW_UPLOAD_PATH", "RawUploads", "check_part_name"]
