"""profile_export_raw.jsonl (`--export-level raw`): every request's response as it was received.

One JSON line per request, after AIPerf 0.13's `RawRecordInfo`:
``{"metadata": {...}, "start_perf_ns": n, "status": 200, "responses": [{"perf_ns": n, "text": "..."}],
"error": {code, type, message}}``. Each entry of `responses` is one network read as the worker got
it (its bytes decoded as UTF-8, undecodable bytes replaced), not one parsed SSE event; `error`
only on failed requests. The request body is not repeated here: `inputs.json` holds it under the
same `conversation_id` and `turn_index`; request headers never are (they may carry secrets).

Each record-processor writes its own part (`RawPartWriter`), staged under a hidden name and
published by `commit` (flushed, fsynced, renamed; the size is what it acknowledges). The
controller then joins the acknowledged parts into the one file (`join_parts`), checking each
part's size against its acknowledgement first, so a short or missing part fails the export.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson

from aiperf.messages import RequestRecord
from aiperf.metrics.atomic import fsync_dir

RAW_JSONL = "profile_export_raw.jsonl"


class RawPartMismatch(Exception):
    """A raw part on disk is not what its writer acknowledged (missing, shorter or longer)."""


def raw_json(record: RequestRecord) -> dict[str, Any]:
    """One request as a raw export line (see the module docstring)."""
    metadata = {"worker_id": record.worker_id, "benchmark_phase": str(record.phase),
                "credit_num": record.credit_num, "conversation_id": record.conversation_id,
                "turn_index": record.turn_index, "x_request_id": record.x_request_id or None,
                "model_name": record.model, "endpoint": record.endpoint, "streaming": record.streaming,
                "request_start_ns": record.start_wall_ns, "was_cancelled": record.cancelled}
    line: dict[str, Any] = {
        "metadata": {k: v for k, v in metadata.items() if v is not None},
        "start_perf_ns": record.start_ns, "status": record.status,
        "responses": [{"perf_ns": ns, "text": chunk.decode("utf-8", "replace")}
                      for ns, chunk in zip(record.chunk_ns, record.chunks, strict=False)]}
    if record.http is not None:
        line["http_trace"] = msgspec.to_builtins(record.http)
    if record.error is not None:
        e = record.error
        line["error"] = {"code": e.code, "type": e.type, "message": e.message}
    return line


class RawPartWriter:
    """One record-processor's part of the raw export at `path`, written under a hidden staging
    name in the same folder until `commit`. Buffered; `write` blocks only on the buffered write
    and raises `OSError` (a full disk), after which the caller should `discard`."""

    def __init__(self, path: str | os.PathLike[str], *, buffer_bytes: int = 1 << 16) -> None:
        self.path = Path(path)
        self._staging = self.path.with_name(f".{self.path.name}.partial")
        self._file: IO[bytes] = open(self._staging, "wb", buffering=buffer_bytes)  # noqa: SIM115
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        """Append one line for `record`."""
        self._file.write(orjson.dumps(raw_json(record)) + b"\n")
        self.count += 1

    def commit(self) -> int:
        """Flush, fsync, close and rename the part to `path`; returns its size in bytes (what the
        caller acknowledges). Raises `OSError` when any step fails (the staging file is then
        removed). Not idempotent: call it once."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._staging, self.path)
        except OSError:
            self.discard()
            raise
        fsync_dir(self.path.parent)
        return self.path.stat().st_size

    def discard(self) -> None:
        """Close without flushing and remove the staging file; idempotent."""
        with contextlib.suppress(OSError):
            self._file.close()  # the flush inside can fail again: the file goes anyway
        with contextlib.suppress(FileNotFoundError):
            self._staging.unlink()


def join_parts(target: str | os.PathLike[str], parts: Sequence[tuple[str | os.PathLike[str], int]]) -> int:
    """Join the committed `parts` ((path, acknowledged size), in order) into `target`: each part's
    size is checked first (`RawPartMismatch` names the first that differs or is missing), then the
    parts are copied to a staging file beside `target`, fsynced and renamed over it, and removed.
    Returns the size of `target`. On failure `target` is left as it was and `OSError` or
    `RawPartMismatch` propagates; the parts stay for inspection."""
    for path, size in parts:
        try:
            actual = os.stat(path).st_size
        except FileNotFoundError:
            raise RawPartMismatch(f"{path}: acknowledged {size} bytes but the file is missing") from None
        if actual != size:
            raise RawPartMismatch(f"{path}: acknowledged {size} bytes but {actual} are on disk")
    final = Path(target)
    staging = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        with open(staging, "wb") as out:
            for path, _ in parts:
                with open(path, "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, final)
    except BaseException:
        with contextlib.suppress(OSError):
            staging.unlink()
        raise
    fsync_dir(final.parent)
    for path, _ in parts:
        os.unlink(path)
    return final.stat().st_size
