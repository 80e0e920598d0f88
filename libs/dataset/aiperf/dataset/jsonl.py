"""Reading JSONL dataset files line by line, with errors that name the file and line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from aiperf.dataset.errors import DatasetError

T = TypeVar("T")


def read_bytes(path: Path) -> bytes:
    """The whole file; raises `DatasetError` ("<path>: cannot read: <reason>") on any OS error."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def records(path: Path, kind: type[T], type_name: str) -> Iterator[tuple[int, T]]:
    """Yield ``(line_number, record)`` for every non-blank line of ``path``, decoded as ``kind``.

    Raises `DatasetError` "<path>:<line>: not valid JSON: ..." or "<path>:<line>: not a valid
    <type_name> record: ..." at the first bad line.
    """
    decoder = msgspec.json.Decoder(kind)
    for number, line in enumerate(read_bytes(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, decoder.decode(line)
        except msgspec.ValidationError as exc:
            raise DatasetError(f"{path}:{number}: not a valid {type_name} record: {exc}") from None
        except msgspec.DecodeError as exc:
            raise DatasetError(f"{path}:{number}: not valid JSON: {exc}") from None


def first_object(path: Path) -> dict[str, Any]:
    """The first non-blank line as a JSON object (for type detection); `DatasetError` if none."""
    for number, line in enumerate(read_bytes(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise DatasetError(f"{path}:{number}: not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise DatasetError(f"{path}:{number}: expected a JSON object, got {type(value).__name__}")
        return value
    raise DatasetError(f"{path}: no records (the file is empty)")
