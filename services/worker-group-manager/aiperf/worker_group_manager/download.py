"""Kubernetes mode: fetch the run's dataset from the api once per worker pod.

A worker pod does not share the controller pod's filesystem. Its worker-group-manager
downloads ``dataset.dat`` and ``index.dat`` from the api (`GET <url>/dataset.dat`, served as
the stored ``.zst`` copy with ``Content-Encoding: zstd``), decompresses the stream itself while
writing it to a pod-local folder (aiohttp's own decoding is off: the bytes on the wire are the
stored file), and checks the result memory-maps. The workers and record-processors of the pod
are then configured with that local folder.

The api answers 503 until it has seen `DatasetConfigured`, and may not accept connections yet
(or its DNS name may not resolve yet) when the pod starts; those are retried with capped
exponential backoff until a deadline. Any other answer is final.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import aiohttp
import anyio
import structlog
import zstandard

from aiperf.comms import CONTROLLER_HOST_ENV
from aiperf.dataset import DATA_FILE, INDEX_FILE, DatasetError, DatasetReader
from aiperf.runtime import GiveUp

log = structlog.get_logger("aiperf.worker_group_manager.download")

API_PORT_ENV = "AIPERF_API_PORT"
DEFAULT_API_PORT = 9090
"""The api's port in Kubernetes (see the api's `main.py`)."""

DATASET_PATH = "/api/dataset"
RETRY_STATUSES = frozenset({502, 503, 504})
"""Answers that mean "not yet" (the api has not seen the dataset, or a proxy in between)."""


def api_url_from_env(env: Mapping[str, str]) -> str | None:
    """``http://$AIPERF_CONTROLLER_HOST:${AIPERF_API_PORT:-9090}`` (the controller's api), or None
    when `AIPERF_CONTROLLER_HOST` is unset. Raises `GiveUp` for a port that is not 1..65535."""
    host = env.get(CONTROLLER_HOST_ENV)
    if not host:
        return None
    raw = env.get(API_PORT_ENV) or str(DEFAULT_API_PORT)
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise GiveUp(f"{API_PORT_ENV}={raw!r} is not a TCP port (1..65535)")
    bracketed = f"[{host}]" if ":" in host else host
    return f"http://{bracketed}:{int(raw)}"


def dataset_url_from_env(env: Mapping[str, str]) -> str | None:
    """``<api_url_from_env>/api/dataset``, or None when `AIPERF_CONTROLLER_HOST` is unset.
    Raises `GiveUp` for a port that is not 1..65535."""
    base = api_url_from_env(env)
    return None if base is None else base + DATASET_PATH


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How long to keep asking while the api is not ready: waits start at `first_delay_s`,
    double up to `max_delay_s`, and stop `deadline_s` after the first attempt of a file."""

    deadline_s: float = 60.0
    first_delay_s: float = 0.1
    max_delay_s: float = 2.0


@dataclass(frozen=True, kw_only=True)
class Downloaded:
    """A dataset made local: its folder, conversation count and bytes on the wire/on disk."""

    directory: Path
    conversations: int
    wire_bytes: int
    disk_bytes: int


class DatasetDownloader:
    """Downloads the two dataset files into a folder and verifies they open.

    `session` is owned by the caller (`main.py` opens it); requests have no total timeout
    (a dataset may be large) but bounded connect and read-idle timeouts."""

    def __init__(self, *, session: aiohttp.ClientSession, retry: RetryPolicy | None = None,
                 chunk_bytes: int = 1 << 20, read_timeout_s: float = 60.0) -> None:
        self._session, self._retry, self._chunk = session, retry or RetryPolicy(), chunk_bytes
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout_s)

    async def download(self, base_url: str, directory: Path) -> Downloaded:
        """Fetch ``<base_url>/dataset.dat`` and ``<base_url>/index.dat`` into `directory`
        (created if needed; each file appears atomically) and open them with `DatasetReader`.

        Raises `GiveUp` when the api stays unavailable past the retry deadline, answers
        anything but 200 or a retryable status, sends an unsupported encoding or a corrupt or
        truncated stream, or the files do not form a dataset."""
        await anyio.Path(directory).mkdir(parents=True, exist_ok=True)
        wire = disk = 0
        for name in (DATA_FILE, INDEX_FILE):
            got_wire, got_disk = await self._fetch(f"{base_url.rstrip('/')}/{name}", directory / name)
            wire, disk = wire + got_wire, disk + got_disk
        try:
            conversations = await anyio.to_thread.run_sync(_count, directory)
        except DatasetError as exc:
            raise GiveUp(f"downloaded dataset in {directory} does not open: {exc}") from exc
        return Downloaded(directory=directory, conversations=conversations, wire_bytes=wire, disk_bytes=disk)

    async def _fetch(self, url: str, target: Path) -> tuple[int, int]:
        """One file, retried while the api is not ready; returns (wire bytes, disk bytes)."""
        retry = self._retry
        deadline = anyio.current_time() + retry.deadline_s
        delay, attempts = retry.first_delay_s, 0
        while True:
            attempts += 1
            try:
                async with self._session.get(url, auto_decompress=False, timeout=self._timeout,
                                             headers={"Accept-Encoding": "zstd"}) as response:
                    if response.status == 200:
                        return await self._save(url, response, target)
                    if response.status not in RETRY_STATUSES:
                        detail = (await response.text(errors="replace"))[:200]
                        raise GiveUp(f"GET {url}: HTTP {response.status}: {detail}")
                    why = f"HTTP {response.status}"
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                why = f"{type(exc).__name__}: {exc}"
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise GiveUp(f"dataset not available at {url} after {attempts} attempts in "
                             f"{retry.deadline_s:g}s (last: {why}); is the api running?")
            log.info("dataset.retry", url=url, why=why, attempt=attempts)
            await anyio.sleep(min(delay, remaining))
            delay = min(delay * 2, retry.max_delay_s)

    async def _save(self, url: str, response: aiohttp.ClientResponse, target: Path) -> tuple[int, int]:
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("zstd", "identity"):
            raise GiveUp(f"GET {url}: unsupported Content-Encoding {encoding!r} (expected zstd)")
        sink = _Sink(target, compressed=encoding == "zstd")
        try:
            async for chunk in response.content.iter_chunked(self._chunk):
                await anyio.to_thread.run_sync(sink.write, chunk)
            await anyio.to_thread.run_sync(sink.finish)
        except zstandard.ZstdError as exc:
            raise GiveUp(f"GET {url}: corrupt zstd stream: {exc}") from exc
        finally:
            sink.discard()
        log.info("dataset.downloaded", url=url, wire_bytes=sink.wire_bytes, disk_bytes=sink.disk_bytes)
        return sink.wire_bytes, sink.disk_bytes


class _Sink:
    """Writes one file, decompressing on the way, under ``<name>.tmp``; `finish` renames it
    into place, `discard` removes a temporary left by a failure. Blocking (run in a thread)."""

    def __init__(self, target: Path, *, compressed: bool) -> None:
        self._target, self._tmp = target, target.with_name(target.name + ".tmp")
        self._decoder = zstandard.ZstdDecompressor().decompressobj() if compressed else None
        self._file: BinaryIO | None = None
        self.wire_bytes = self.disk_bytes = 0

    def _out(self) -> BinaryIO:
        if self._file is None:
            self._file = open(self._tmp, "wb")  # closed in finish/discard
        return self._file

    def write(self, chunk: bytes) -> None:
        self.wire_bytes += len(chunk)
        decoder = self._decoder
        if decoder is not None:
            if decoder.eof:
                raise zstandard.ZstdError("unexpected data after the end of the zstd frame")
            chunk = decoder.decompress(chunk)
        self._out().write(chunk)
        self.disk_bytes += len(chunk)

    def finish(self) -> None:
        if self._decoder is not None and not self._decoder.eof:
            raise zstandard.ZstdError("stream ended before the end of the zstd frame (truncated)")
        out = self._out()
        out.close()
        self._file = None
        os.replace(self._tmp, self._target)

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._tmp.unlink(missing_ok=True)


def _count(directory: Path) -> int:
    with DatasetReader(directory) as reader:
        return len(reader)


class PodDataset:
    """The pod's one copy of the dataset: the first `ensure` downloads it into `directory`,
    later (or concurrent) calls return the same result without downloading again. A failed
    download is not cached: the next `ensure` tries again."""

    def __init__(self, *, downloader: DatasetDownloader, directory: Path, default_url: str | None) -> None:
        self._downloader, self.directory, self._default_url = downloader, directory, default_url
        self._lock = anyio.Lock()
        self._done: Downloaded | None = None

    async def ensure(self, url: str | None = None) -> Downloaded:
        """Make the dataset local from `url` (else the default from the environment).

        Raises `GiveUp` without any URL, or as `DatasetDownloader.download` does."""
        async with self._lock:
            if self._done is None:
                base = url or self._default_url
                if not base:
                    raise GiveUp(f"no dataset URL: ProfileConfigure has no options.dataset_url and "
                                 f"{CONTROLLER_HOST_ENV} is not set in this pod")
                self._done = await self._downloader.download(base, self.directory)
            return self._done


__all__ = ["API_PORT_ENV", "DEFAULT_API_PORT", "DatasetDownloader", "Downloaded", "PodDataset",
           "RetryPolicy", "api_url_from_env", "dataset_url_from_env"]
