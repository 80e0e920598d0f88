"""The results server's Litestar app: stored runs over HTTP (JSON, keys in camelCase).

Routes (errors are JSON ``{"status_code": n, "detail": "..."}``, as the api service's):

| route | answer |
|---|---|
| ``GET /healthz`` | ``{"status": "ok"}`` |
| ``GET /api/v1/results`` | ``{"jobs": [{"namespace", "name", "runCount", "latestEpoch", "phase"}]}``: every job with stored runs, by namespace and name (stored sweeps are under ``/api/v1/sweeps``); `latestEpoch` is the newest successful run (`latest.txt`, null before one), `phase` the newest run's; with live progress (operator mode) a job still going also has ``progress`` ``{"phase", "completed", "expected", "errors"}`` |
| ``GET /api/v1/results/<ns>/<name>/runs`` | ``{"namespace", "name", "latestEpoch", "runs": [RUN...]}``, newest first; 404 for a job with no run |
| ``GET /api/v1/results/<ns>/<name>`` | **409**: an epoch is required (use ``.../runs``) |
| ``GET /api/v1/results/<ns>/<name>.zip`` | **409** |
| ``GET /api/v1/results/<ns>/<name>/<filename>`` | **409** |
| ``GET /api/v1/results/<ns>/<name>/runs/<epoch>`` | RUN plus ``"namespace", "name", "latest"`` (bool): one pinned run and its files |
| ``GET /api/v1/results/<ns>/<name>/runs/<epoch>.zip`` | ``application/zip``, streamed: the run's files (409 while the run has none stored) |
| ``GET /api/v1/results/<ns>/<name>/runs/<epoch>/<filename>`` | one file of the run (``.json`` application/json, ``.csv`` text/csv, ``.jsonl`` application/x-ndjson, ``.txt`` text/plain, else octet-stream) |

| ``GET /api/v1/sweeps`` | ``{"sweeps": [...]}``: every AIPerfSweep with stored aggregates, shaped as the job list |
| ``GET /api/v1/sweeps/<ns>/<name>/runs``, ``.../runs/<epoch>``, ``.../runs/<epoch>.zip``, ``.../runs/<epoch>/<filename>`` | as for jobs: a sweep's stored aggregates (`aggregate.json`, the sweep CSV, ...), kept as job ``sweeps/<name>`` |

RUN is ``{"epoch", "phase", "uid", "createdAt", "completedAt", "files": [{"name", "size"}]}``
(`aiperf.results.model.RunRecord.as_json`); `files` is empty until the run is Completed.

`<epoch>` must match `EPOCH_RE` (``\\A\\d{9,10}(\\d{6})?\\Z``), checked before anything else:
422 otherwise (``latest`` included: there is no implicit latest run). `<ns>`, `<name>` and
`<filename>` must be plain names (`SAFE_NAME`: no separators, no leading dot), else 422; a
file is served only when it is a regular file directly inside the run's directory (symlinks
out of it are refused). Unknown job, run or file: 404.

`create_app(source, extra_route_handlers=...)` mounts more handlers beside these (the web
dashboard, `aiperf.dashboard.dashboard_routes()`, serves ``/`` and ``/static/...`` and reads the
JSON routes above; keep their shapes stable). Given a cluster (`serve --in-cluster` or
`--kubeconfig`), the live job status routes of `aiperf.results_server.jobstatus` are mounted too.
"""

from __future__ import annotations

import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, cast

import anyio
import anyio.to_thread
import structlog
from litestar import Litestar, Response, get
from litestar.exceptions import ClientException, HTTPException, NotFoundException
from litestar.params import FromPath
from litestar.response import File, Stream
from litestar.types import ControllerRouterHandler

from aiperf.results import disk
from aiperf.results.keys import is_key
from aiperf.results.local import SAFE_NAME
from aiperf.results.model import TERMINAL_PHASES, JobRecord, RunRecord

log = structlog.get_logger("aiperf.results")

PREFIX = "/api/v1/results"
SWEEPS_PREFIX = "/api/v1/sweeps"
SWEEP_FOLDER = disk.SWEEPS_DIR + "/"
"""A sweep's aggregates are stored as job `sweeps/<name>` of its namespace (the operator's harvest)."""
MEDIA_TYPES = {".json": "application/json", ".csv": "text/csv", ".jsonl": "application/x-ndjson",
               ".txt": "text/plain; charset=utf-8"}
ZIP_CHUNK = 256 * 1024
LiveProgress = Callable[[str, str], Awaitable[dict[str, Any] | None]]
MAX_LIVE_JOBS = 50
"""Jobs still going that the job list asks live progress for (the newest first in the list)."""
LIVE_PROGRESS_TIMEOUT_S = 2.0
"""How long the job list waits for one job's live progress before it is served without it."""


class ResultsSource(Protocol):
    """Where the runs come from: the operator volume's index (`ResultsIndex`) or a local artifact
    tree (`LocalTree`)."""

    async def jobs(self) -> list[JobRecord]: ...

    async def runs(self, namespace: str, name: str) -> list[RunRecord] | None: ...

    async def run(self, namespace: str, name: str, epoch: str) -> RunRecord | None: ...

    async def latest(self, namespace: str, name: str) -> str | None: ...

    async def folder(self, namespace: str, name: str, epoch: str) -> Path | None: ...


def _unpinned(what: str) -> ClientException:
    return ClientException(status_code=409, detail=f"{what} needs an explicit run epoch: list the runs with "
                                                   f"GET {PREFIX}/<ns>/<name>/runs, then use .../runs/<epoch>")


def _epoch(epoch: str) -> str:
    if not is_key(epoch):
        raise ClientException(status_code=422, detail=f"invalid run epoch {epoch!r}: epoch seconds (9-10 digits), "
                                                      "optionally followed by 6 more digits")
    return epoch


def _name(value: str, what: str) -> str:
    if not SAFE_NAME.match(value):
        raise ClientException(status_code=422, detail=f"invalid {what} {value!r}")
    return value


def create_app(source: ResultsSource, *, extra_route_handlers: Sequence[ControllerRouterHandler] = (),
               live_progress: LiveProgress | None = None) -> Litestar:
    """The app over `source` (see the module doc); `extra_route_handlers` are mounted too.
    `live_progress(ns, name)`: the progress the job list adds to each job whose newest run is
    still going (None: none added)."""

    @get("/healthz", sync_to_thread=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @get(PREFIX)
    async def jobs() -> dict[str, Any]:
        listed = [j.as_json() for j in await source.jobs() if not j.name.startswith(SWEEP_FOLDER)]
        if live_progress is not None:
            going = [j for j in listed if j.get("phase") not in TERMINAL_PHASES][:MAX_LIVE_JOBS]

            async def fill(job: dict[str, Any]) -> None:
                with anyio.move_on_after(LIVE_PROGRESS_TIMEOUT_S):
                    progress = await live_progress(job["namespace"], job["name"])
                    if progress is not None:
                        job["progress"] = progress

            async with anyio.create_task_group() as tg:
                for job in going:
                    tg.start_soon(fill, job)
        return {"jobs": listed}

    @get(PREFIX + "/{ns:str}/{name:str}", sync_to_thread=False)
    def job_unpinned(ns: FromPath[str], name: FromPath[str]) -> None:
        raise _unpinned("a run's files" if not name.endswith(".zip") else "a zip of a run")

    @get(PREFIX + "/{ns:str}/{name:str}/{filename:str}", sync_to_thread=False)
    def file_unpinned(ns: FromPath[str], name: FromPath[str], filename: FromPath[str]) -> None:
        raise _unpinned(f"file {filename!r}")

    @get(SWEEPS_PREFIX)
    async def sweeps() -> dict[str, Any]:
        found = [j.as_json() for j in await source.jobs() if j.name.startswith(SWEEP_FOLDER)]
        return {"sweeps": [{**j, "name": j["name"][len(SWEEP_FOLDER):]} for j in found]}

    handlers: list[ControllerRouterHandler] = [healthz, jobs, job_unpinned, file_unpinned, sweeps,
                                               *_run_routes(source, PREFIX, "job"),
                                               *_run_routes(source, SWEEPS_PREFIX, "sweep", SWEEP_FOLDER)]
    return Litestar(route_handlers=[*handlers, *extra_route_handlers], logging_config=None,
                    after_exception=[_log_unexpected], openapi_config=None)


def _run_routes(source: ResultsSource, prefix: str, what: str, folder: str = "") -> list[ControllerRouterHandler]:
    """The runs, run and file routes under `prefix` for stored `what`s (jobs, sweeps) whose
    results are indexed under `folder` + their name (see the module doc)."""

    @get(prefix + "/{ns:str}/{name:str}/runs", name=f"{what}-runs")
    async def runs(ns: FromPath[str], name: FromPath[str]) -> dict[str, Any]:
        key = folder + _name(name, f"{what} name")
        found = await source.runs(_name(ns, "namespace"), key)
        if not found:
            raise NotFoundException(detail=f"no stored runs of {what} {ns}/{name}")
        return {"namespace": ns, "name": name, "latestEpoch": await source.latest(ns, key),
                "runs": [r.as_json() for r in found]}

    @get(prefix + "/{ns:str}/{name:str}/runs/{epoch:str}", name=f"{what}-run")
    async def run(ns: FromPath[str], name: FromPath[str], epoch: FromPath[str]) -> Response[Any]:
        key = folder + _name(name, f"{what} name")
        if epoch.endswith(".zip"):
            return await _zip(source, ns, key, _epoch(epoch[:-4]), download=name)
        record = await _run(source, ns, key, _epoch(epoch))
        body = {"namespace": ns, "name": name, **record.as_json(),
                "latest": await source.latest(ns, key) == record.epoch}
        return Response(content=body)

    @get(prefix + "/{ns:str}/{name:str}/runs/{epoch:str}/{filename:str}", name=f"{what}-run-file")
    async def run_file(ns: FromPath[str], name: FromPath[str], epoch: FromPath[str],
                       filename: FromPath[str]) -> File:
        _epoch(epoch)
        _name(filename, "file name")
        key = folder + _name(name, f"{what} name")
        record = await _run(source, ns, key, epoch)
        if filename not in {f.name for f in record.files}:
            raise NotFoundException(detail=f"run {ns}/{key}/{epoch} has no file {filename!r}")
        stored = await source.folder(ns, key, epoch)
        path = await _inside(stored, filename) if stored is not None else None
        if path is None:
            raise NotFoundException(detail=f"run {ns}/{key}/{epoch} has no file {filename!r}")
        return File(path=path, filename=filename, content_disposition_type="inline",
                    media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"))

    return [runs, run, run_file]


async def _run(source: ResultsSource, ns: str, key: str, epoch: str) -> RunRecord:
    """Run `epoch` of the stored job `key` (a name already checked, or `sweeps/<name>`)."""
    record = await source.run(_name(ns, "namespace"), key, epoch)
    if record is None:
        raise NotFoundException(detail=f"no run {epoch} of {ns}/{key}")
    return record


async def _inside(folder: Path, filename: str) -> Path | None:
    """`folder/filename` when it is a regular file whose real path is directly in `folder`."""
    root = await anyio.Path(folder).resolve()
    path = await (root / filename).resolve()
    if path.parent != root or not await path.is_file():
        return None
    return Path(path)


async def _zip(source: ResultsSource, ns: str, key: str, epoch: str, *, download: str) -> Stream:
    record = await _run(source, ns, key, epoch)
    folder = await source.folder(ns, key, epoch)
    if not record.completed or folder is None:
        raise ClientException(status_code=409, detail=f"run {ns}/{key}/{epoch} is {record.phase}: no stored files")
    members = [f.name for f in record.files]
    return Stream(content=_threaded(_zip_chunks(Path(folder), members)), media_type="application/zip",
                  headers={"Content-Disposition": f'attachment; filename="{download}-{epoch}.zip"'})


class _Sink:
    """A write-only, non-seekable file for `zipfile`: collects what it writes until taken."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._offset = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self._offset += len(data)
        return len(data)

    def tell(self) -> int:
        return self._offset

    def flush(self) -> None:
        return None

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def _zip_chunks(folder: Path, members: list[str]) -> Iterator[bytes]:
    """The zip of `members` of `folder`, produced chunk by chunk (blocking: run each step in a
    thread). A member that vanished meanwhile is left out."""
    sink = _Sink()
    with zipfile.ZipFile(cast("IO[bytes]", sink), "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member in members:
            try:
                source = open(folder / member, "rb")  # noqa: SIM115 - closed below, across yields
            except FileNotFoundError:
                continue
            with source, archive.open(member, "w") as target:
                while block := source.read(ZIP_CHUNK):
                    target.write(block)
                    if chunk := sink.take():
                        yield chunk
    if tail := sink.take():
        yield tail


async def _threaded(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Drive a blocking iterator from worker threads, one step per thread call."""
    done = object()
    while (chunk := await anyio.to_thread.run_sync(next, chunks, done)) is not done:
        yield chunk  # type: ignore[misc]


async def _log_unexpected(exc: Exception, _scope: Any) -> None:
    # async: Litestar would run a sync hook in a worker thread
    if not (isinstance(exc, HTTPException) and exc.status_code < 500):
        log.error("results.request_failed", error=repr(exc))


__all__ = ["MEDIA_TYPES", "PREFIX", "ResultsSource", "create_app"]
