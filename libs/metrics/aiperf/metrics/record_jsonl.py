"""profile_export.jsonl: one line per request, in AIPerf 0.13's record shape.

``{"metadata": {...}, "metrics": {tag: {"value": v, "unit": u}}, "trace_data": {...}, "error": {code,
type, message}}`` with values in display units (ms, tokens, tokens/sec/user); ``trace_data`` only
when the run exports HTTP traces (`artifacts.trace`), ``error`` only on failed requests and
metadata keys whose value is None left out, as AIPerf drops None fields.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NamedTuple

import orjson

from aiperf.messages import MetricRecord
from aiperf.metrics.catalog import SPECS, spec_of


class _Shown(NamedTuple):
    """How one tag's values are shown in a line: in `unit` (base value times `scale`), a single
    whole number of tokens as an int."""

    unit: str
    scale: float
    tokens: bool

    @classmethod
    def of(cls, tag: str) -> _Shown | None:
        """`tag`'s display (None: an internal tag, never exported); unknown tags as `spec_of`."""
        spec = spec_of(tag)
        return None if spec.internal else cls(spec.unit, spec.scale, spec.unit == "tokens")


_SHOWN: dict[str, _Shown | None] = {tag: _Shown.of(tag) for tag in SPECS}
"""Every cataloged tag's display, prepared once."""


def _shown_metrics(metrics: dict[str, float | list[float]]) -> dict[str, Any]:
    """`{tag: {"value": v, "unit": u}}` for the exported tags of `metrics`, in its order."""
    out: dict[str, Any] = {}
    shown_of = _SHOWN
    for tag, value in metrics.items():
        try:
            shown = shown_of[tag]
        except KeyError:
            shown = _Shown.of(tag)
        if shown is None:
            continue
        unit, scale, tokens = shown
        if isinstance(value, list):
            if scale != 1.0:
                value = list(map(operator.mul, value, itertools.repeat(scale)))
        elif tokens and float(value).is_integer():
            value = int(value)
        elif scale != 1.0:
            value = value * scale
        out[tag] = {"value": value, "unit": unit}
    return out


def record_json(record: MetricRecord) -> dict[str, Any]:
    """One request as AIPerf's `MetricRecordInfo` JSON object."""
    line: dict[str, Any] = {"metadata": {k: v for k, v in record.metadata.items() if v is not None},
                            "metrics": _shown_metrics(record.metrics)}
    if record.trace_data is not None:
        line["trace_data"] = record.trace_data
    if record.error is not None:
        e = record.error
        line["error"] = {"code": e.code, "type": e.type, "message": e.message}
    return line


def record_lines(records: Sequence[MetricRecord]) -> bytes:
    """The jsonl lines of `records`, in order, each ending in a newline."""
    dumps, option = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    return b"".join([dumps(record_json(r), option=option) for r in records])


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
        self._file.write(orjson.dumps(record_json(record), option=orjson.OPT_APPEND_NEWLINE))
        self._count += 1

    def write_many(self, records: Sequence[MetricRecord]) -> None:
        """Append the lines of `records`, in order, with one file write: the same bytes as
        `write` on each in turn."""
        if records:
            self._file.write(record_lines(records))
            self._count += len(records)

    def write_lines(self, lines: bytes, count: int) -> None:
        """Append `count` lines already rendered by `record_lines` (a shard's), as they are."""
        if lines:
            self._file.write(lines)
            self._count += count

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
