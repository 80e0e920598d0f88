"""Kubernetes, `--export-level raw`: upload the pod's raw parts to the controller's api.

The record-processors of a worker pod write their parts on the pod's own disk; the controller
joins them only once they are on its disk. At finalize the worker-group-manager `PUT`s each part
to ``<api>/api/raw/<name>`` (the api stages, fsyncs and renames it) with the run's bearer token
(`CurveKeys.http_token(RAW_UPLOAD_TOKEN)`), and compares the byte count the api acknowledges
with the bytes it sent: a part is uploaded when both agree, and never otherwise.

Connection failures and 502/503/504 are retried with capped backoff until a deadline (the
controller bounds the whole barrier with its own deadline too); any other answer is final.
"""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import anyio
import structlog

from aiperf.messages import RawPart
from aiperf.runtime import GiveUp
from aiperf.worker_group_manager.download import RETRY_STATUSES, RetryPolicy

log = structlog.get_logger("aiperf.worker_group_manager.upload")

RAW_UPLOAD_PATH = "/api/raw"
"""The api's upload route (`aiperf.api.raw_upload`)."""


class RawUploader:
    """Uploads raw parts to the controller's api. `session` is owned by the caller; `token`
    None (no key material) refuses to upload at all: the api would refuse it anyway."""

    def __init__(self, *, session: aiohttp.ClientSession, token: str | None, retry: RetryPolicy | None = None,
                 read_timeout_s: float = 60.0) -> None:
        self._session, self._token = session, token
        self._retry = retry or RetryPolicy()
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout_s)

    async def upload(self, api_url: str, parts: list[RawPart]) -> list[RawPart]:
        """Upload each of `parts` (read from its `path`) to `api_url` and return them with the
        sizes the api acknowledged. Blocks until all are acknowledged. Raises `GiveUp` naming
        the part when its file is not the size its record-processor acknowledged, the api
        acknowledges another size than was sent, answers anything but 201 or a retryable
        status, or stays unreachable past the retry deadline."""
        if self._token is None:
            raise GiveUp("raw parts cannot be uploaded: this pod has no run key material "
                         "(the run's CURVE Secret is not mounted)")
        done = []
        for part in parts:
            acked = await self._one(api_url.rstrip("/"), part)
            done.append(RawPart(name=part.name, size=acked, records=part.records))
        return done

    async def _one(self, api_url: str, part: RawPart) -> int:
        path = Path(part.path)
        try:
            on_disk = (await anyio.Path(path).stat()).st_size
        except FileNotFoundError:
            raise GiveUp(f"raw part {part.name}: {path} is missing in this pod") from None
        if on_disk != part.size:
            raise GiveUp(f"raw part {part.name}: {path} has {on_disk} bytes but its record-processor "
                         f"acknowledged {part.size}")
        url = f"{api_url}{RAW_UPLOAD_PATH}/{part.name}"
        headers = {"Authorization": f"Bearer {self._token}", "Content-Length": str(on_disk),
                   "Content-Type": "application/x-ndjson"}
        retry = self._retry
        deadline = anyio.current_time() + retry.deadline_s
        delay, attempts = retry.first_delay_s, 0
        while True:
            attempts += 1
            try:
                # aiohttp streams an open file in pieces, reading it in its executor; the file
                # closes after the response, whose context ends the request's writer
                with open(path, "rb") as body:  # noqa: ASYNC230 - opening is cheap, reads are off-loop
                    async with self._session.put(url, data=body, headers=headers,
                                                 timeout=self._timeout) as response:
                        if response.status == 201:
                            acked = _acknowledged(url, await response.read())
                            if acked != on_disk:
                                raise GiveUp(f"raw part {part.name}: the controller acknowledged {acked} "
                                             f"bytes of the {on_disk} sent")
                            log.info("raw.uploaded", part=part.name, size=acked, attempts=attempts)
                            return acked
                        if response.status not in RETRY_STATUSES:
                            detail = (await response.text(errors="replace"))[:200]
                            raise GiveUp(f"PUT {url}: HTTP {response.status}: {detail}")
                        why = f"HTTP {response.status}"
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                why = f"{type(exc).__name__}: {exc}"
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise GiveUp(f"raw part {part.name} not uploaded to {url} after {attempts} attempts in "
                             f"{retry.deadline_s:g}s (last: {why})")
            log.info("raw.upload_retry", part=part.name, why=why, attempt=attempts)
            await anyio.sleep(min(delay, remaining))
            delay = min(delay * 2, retry.max_delay_s)


def _acknowledged(url: str, body: bytes) -> int:
    """The byte count of a 201 answer ``{"size": n}``; `GiveUp` when it has none."""
    try:
        size = json.loads(body)["size"]
    except (ValueError, KeyError, TypeError) as exc:
        raise GiveUp(f"PUT {url}: unreadable acknowledgement {body[:100]!r}") from exc
    if not isinstance(size, int):
        raise GiveUp(f"PUT {url}: unreadable acknowledgement {body[:100]!r}")
    return size


__all__ = ["RAW_UPLOAD_PATH", "RawUploader"]
