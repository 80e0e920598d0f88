"""profile_export.jsonl: one line per request, in AIPerf 0.13's record shape.

``{"metadata": {...}, "metrics": {tag: {"value": v, "unit": u}}, "error": {code, type, message}}``
with values in display units (ms, tokens, tokens/sec/user); ``error`` only on failed requests
and metadata keys whose value is None left out, as AIPerf drops None fields.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from aiperf.messages import MetricRecord
from aiperf.metrics.catalog import spec_of


def _display(value: float, scale: float, unit: str) -> float | int:
    if unit == "tokens" and float(value).is_integer():
        return int(value)
    return value * scale if scale != 1.0 else value


def record_json(record: MetricRecord) -> dict[str, Any]:
    """One request as AIPerf's `MetricRecordInfo` JSON object."""
    metrics: dict[str, Any] = {}
    for tag, value in record.metrics.items():
        spec = spec_of(tag)
        if spec.internal:
            continue
        if isinstance(value, list):
            shown: Any = [v * spec.scale for v in value] if spec.scale != 1.0 else list(value)
        else:
            shown = _display(value, spec.scale, spec.unit)
        metrics[tag] = {"value": shown, "unit": spec.unit}
    line: dict[str, Any] = {"metadata": {k: v for k, v in record.metadata.items() if v is not None},
                            "metrics": metrics}
    if record.error is not None:
        e = record.error
        line["error"] = {"code": e.code, "type": e.type, "message": e.message}
    return line


class JsonlRecordWriter:
    """Streams records to a JSONL file as they arrive; buffered, flushed on `flush`/`close`.

    Opens (truncates) `path` on construction. Use as a context manager or call `close`.
    `write` blocks only on the buffered file write.
    """

    def __init__(self, path: str | os.PathLike[str], *, buffer_bytes: int = 1 << 16) -> None:
        self._path = Path(path)
        self._file: IO[bytes] = open(path, "wb", buffering=buffer_bytes)  # noqa: SIM115
        self._count = 0

    @property
    def count(self) -> int:
        """Lines written so far."""
        return self._count

    def write(self, record: MetricRecord) -> None:
        """Append one line for `record`."""
        self._file.write(orjson.dumps(record_json(record)) + b"\n")
        self._count += 1

    def flush(self) -> None:
        """Push buffered lines to the OS."""
        self._file.flush()

    def close(self) -> None:
        """Flush and close; idempotent."""
        if not self._file.closed:
            self._file.flush()
            self._file.close()

    def discard(self) -> None:
        """Close without flushing what is buffered and remove the file: after a failed write
        (a full disk) its last line may be cut, and a partial export must not pass for one."""
        with contextlib.suppress(OSError):
            self._file.close()  # the flush inside can fail again: the file goes anyway
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()

    def __enter__(self) -> JsonlRecordWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
