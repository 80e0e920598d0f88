"""Rows of a few typed columns appended in order and read back in blocks, in unnamed temporary
files when given a directory (the sweep metrics' pieces: the page cache is not the process's
memory), else in memory.

`PieceFile(dtypes, spill)`: `append(*arrays)` adds rows (one array per column, equal lengths),
`blocks()` yields tuples of arrays of up to `BLOCK` rows, in order, as often as called; `close()`
drops the files. When a file cannot be created or written (no room, no directory) the rows stay
in memory from then on: a run never fails for it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from aiperf.metrics.columns import FileArray
from aiperf.metrics.exact import BLOCK


class PieceFile:
    """Append-only rows of columns of fixed numpy `dtypes`, spilled to `spill` (a directory)."""

    __slots__ = ("_dtypes", "_spill", "_files", "_filed", "_memory", "size")

    def __init__(self, dtypes: Sequence[npt.DTypeLike], spill: Path | None = None) -> None:
        self._dtypes = [np.dtype(d) for d in dtypes]
        self._spill = spill
        self._files: list[BinaryIO] = []
        self._filed = 0  # rows in the files
        self._memory: list[tuple[np.ndarray, ...]] = []  # rows after them (no files, or they failed)
        self.size = 0

    def append(self, *columns: np.ndarray) -> None:
        """Add `len(columns[0])` rows (each column converted to its dtype)."""
        cols = tuple(np.ascontiguousarray(c, dtype=d) for c, d in zip(columns, self._dtypes, strict=True))
        if cols[0].size == 0:
            return
        if self._spill is not None and not self._memory:
            try:
                if not self._files:
                    self._files = [tempfile.TemporaryFile(dir=self._spill) for _ in self._dtypes]
                for f, c in zip(self._files, cols, strict=True):
                    f.seek(self._filed * c.itemsize)
                    f.write(c.tobytes())
                    f.flush()
                self._filed += cols[0].size
                self.size += cols[0].size
                return
            except OSError:
                self._spill = None  # keep these and later rows in memory
        self._memory.append(cols)
        self.size += cols[0].size

    def blocks(self, size: int | None = None) -> Iterator[tuple[np.ndarray, ...]]:
        """The rows, up to `size` (default `BLOCK`) at a time, in order."""
        size = size or BLOCK
        if self._filed:
            arrays = [FileArray(f.fileno(), d, self._filed) for f, d in zip(self._files, self._dtypes, strict=True)]
            for a in range(0, self._filed, size):
                yield tuple(x[a:a + size] for x in arrays)
        for cols in self._memory:
            for a in range(0, cols[0].size, size):
                yield tuple(c[a:a + size] for c in cols)

    def close(self) -> None:
        """Drop the rows and their files."""
        for f in self._files:
            f.close()
        self._files, self._memory, self._filed, self.size = [], [], 0, 0

    def __enter__(self) -> PieceFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["PieceFile"]
