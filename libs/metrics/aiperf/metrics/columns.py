"""Typed, compact, exact columns of metric values, optionally spilled to disk a block at a time.

`Column` keeps one metric's values in arrival order (uint32 while they fit, float64 after);
with a spill directory its values leave memory `Column.SPILL` at a time for an unnamed file.
`FileArray` reads such a file back by slice or index (the sweep metrics' chunk gaps).
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from aiperf.metrics.exact import BLOCK

_U32_END = 1 << 32
_DTYPES: dict[str, np.dtype[Any]] = {"I": np.dtype(np.uint32), "d": np.dtype(np.float64)}
"""The numpy type of each typed array's typecode."""


class FileArray:
    """A read-only 1-D array of `size` values of `dtype` in an open file (from offset 0), read on
    demand: ``a[i:j]`` (one read) and ``a[indices]`` (an integer array: the values from the
    lowest index to the highest in one read when they span under 4 values per index, else the
    indices' clusters read whole, a cluster being indices less than `CLUSTER` values apart) give numpy arrays, as
    indexing a numpy array would. The sweep metrics read a spilled chunk-gap column through it
    (`Timeline.icl`), so the gaps are never all in memory at once."""

    __slots__ = ("_fd", "dtype", "size")

    CLUSTER = 1 << 12

    def __init__(self, fd: int, dtype: np.dtype, size: int) -> None:
        self._fd, self.dtype, self.size = fd, np.dtype(dtype), size

    def __len__(self) -> int:
        return self.size

    def _read(self, start: int, stop: int) -> np.ndarray:
        item = self.dtype.itemsize
        raw = os.pread(self._fd, (stop - start) * item, start * item)
        if len(raw) != (stop - start) * item:
            raise OSError(f"a spill file is shorter than its {self.size} values")
        return np.frombuffer(raw, dtype=self.dtype)

    def __getitem__(self, key: slice | np.ndarray) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step != 1:
                raise IndexError("FileArray reads contiguous slices only")
            return self._read(start, max(start, stop))
        index = np.asarray(key)
        if index.dtype.kind not in "iu":
            raise IndexError("FileArray takes a slice or an integer array")
        if index.size == 0:
            return np.zeros(index.shape, self.dtype)
        index = np.where(index < 0, index + self.size, index)
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= self.size:
            raise IndexError("index out of range")
        if hi - lo < max(4 * index.size, self.CLUSTER):  # the usual case: nearby values, one read
            return self._read(lo, hi + 1)[index - lo]
        wanted = np.unique(index)
        cut = np.flatnonzero(np.diff(wanted) > self.CLUSTER) + 1
        found = np.empty(wanted.size, self.dtype)
        for lo, hi in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [wanted.size]]).tolist(),
                          strict=True):
            first, last = int(wanted[lo]), int(wanted[hi - 1])
            found[lo:hi] = self._read(first, last + 1)[wanted[lo:hi] - first]
        return found[np.searchsorted(wanted, index)]


class Column:
    """One metric's values, appended in arrival order, kept compact and exact: 4 bytes per value
    while every value is a whole number in [0, 2^32) and not -0.0 (times in ns under 4.3 s, counts, byte
    sizes), 8 (float64) from the first value that is not (the earlier ones are converted, which
    is exact). NaN marks a missing value (and switches to float64).

    Appended values wait in a list until `PENDING` of them have gathered, then enter the typed
    array together, so a value costs a list append, not a numpy call; every read (`data`,
    `values`, `blocks`, `len`) sees them all. The typed array ends the same whichever way the
    values were grouped.

    With `spill` (a directory), every `SPILL` values that have entered the typed array are
    appended to an unnamed temporary file there (`tempfile.TemporaryFile`: `O_TMPFILE`, or
    unlinked as soon as created; removed by the system when the column is
    closed or the process ends, whatever the way) and leave memory: a long run holds one block
    per column, not the run. The file always holds the column's current type (a widening
    rewrites it as float64, once). `blocks` reads it back a block at a time; `data` and
    `values` read all of it.
    """

    __slots__ = ("_data", "_pending", "_spill", "_file", "_spilled")

    PENDING = 2048
    SPILL = 1 << 16

    def __init__(self, spill: Path | None = None) -> None:
        self._data: array[int] | array[float] = array("I")
        self._pending: list[float] = []
        self._spill = spill
        self._file: BinaryIO | None = None
        self._spilled = 0  # values in the file

    def __len__(self) -> int:
        return self._spilled + len(self._data) + len(self._pending)

    @property
    def typecode(self) -> str:
        """"I" (uint32) or "d" (float64): the type of every value so far."""
        return self._typed().typecode

    @property
    def data(self) -> array[int] | array[float]:
        """The typed array of every value so far ("I" or "d"); a spilled column's is read back
        from its file (a copy)."""
        data = self._typed()
        if not self._spilled:
            return data
        whole = array(data.typecode)
        for block in self.blocks(self.SPILL):
            whole.frombytes(block.tobytes())
        return whole

    def _typed(self) -> array[int] | array[float]:
        """The typed array in memory (the values not spilled), the pending values in it."""
        if self._pending:
            self._settle()
        return self._data

    def _widen(self) -> array[float]:
        if self._spilled and self._file is not None:  # the file's uint32 values, rewritten as float64
            try:
                wide_file = tempfile.TemporaryFile(dir=self._spill)
                for block in self._file_blocks("I", self.SPILL):
                    wide_file.write(block.astype(np.float64).tobytes())
                wide_file.flush()  # read back with pread, past Python's buffer
            except OSError:  # no room: every value back in memory, no more spilling
                self._unspill()
            else:
                self._file.close()
                self._file = wide_file
        wide = array("d", self._data)
        self._data = wide
        return wide

    def _unspill(self) -> None:
        """Take the spilled values back into memory and stop spilling (the disk failed us)."""
        self._data = self.data
        self._spilled, self._spill = 0, None
        self.close()

    def _spill_full(self, *, force: bool = False) -> None:
        """Move the typed array to the file once it holds `SPILL` values (with `spill`; `force`:
        whatever it holds). When
        the file cannot be created or written (no room, no directory) the values stay in memory
        and the column stops spilling: the run never fails for it."""
        data = self._data
        if self._spill is None or not data or (len(data) < self.SPILL and not force):
            return
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(dir=self._spill)
            self._file.seek(self._spilled * data.itemsize)
            self._file.write(data.tobytes())
            self._file.flush()
        except OSError:
            if self._spilled:
                self._unspill()
            else:
                self.close()
                self._spill = None
            return
        self._spilled += len(data)
        self._data = array(data.typecode)

    def _in_file(self, typecode: str) -> FileArray:
        """The spilled values, read from the file as `typecode` ("I" or "d")."""
        assert self._file is not None
        return FileArray(self._file.fileno(), _DTYPES[typecode], self._spilled)

    def _file_blocks(self, typecode: str, size: int) -> Iterator[np.ndarray]:
        """The spilled values, `size` at a time."""
        spilled = self._in_file(typecode)
        for a in range(0, self._spilled, size):
            yield spilled[a:a + size]

    def append(self, value: float) -> None:
        pending = self._pending
        pending.append(value)
        if len(pending) >= self.PENDING:
            self._settle()

    def extend(self, values: Sequence[float]) -> None:
        pending = self._pending
        pending += values
        if len(pending) >= self.PENDING:
            self._settle()

    def pad(self, n: int) -> None:
        """Append NaN (missing) until the column holds `n` values."""
        if len(self) < n:
            self.extend([math.nan] * (n - len(self)))

    def _settle(self) -> None:
        """Move the pending values into the typed array: as uint32 while they all fit, else
        (widening the array first) as float64."""
        pending, self._pending = self._pending, []
        wide = struct.pack(f"{len(pending)}d", *pending)  # float(value) each: faster than array("d", ...)
        data = self._data
        if data.typecode == "I":
            a = np.frombuffer(wide, dtype=np.float64)
            if a.size and a.min() >= 0.0 and a.max() < _U32_END:  # False with a NaN
                narrow = a.astype(np.uint32)
                if (narrow == a).all() and not np.signbit(a).any():  # whole numbers, no -0.0
                    data.frombytes(narrow.tobytes())
                    self._spill_full()
                    return
            data = self._widen()
        data.frombytes(wide)
        self._spill_full()

    def values(self) -> np.ndarray:
        """The values as float64."""
        return np.asarray(self.data, dtype=np.float64)

    def array(self) -> np.ndarray:
        """Every value in one numpy array of the column's type (uint32 or float64): a view of the
        typed array, or, spilled, filled block by block (the file read once, no other copy)."""
        data = self._typed()
        if not self._spilled:
            return np.asarray(data)
        out = np.empty(len(self), _DTYPES[data.typecode])
        at = 0
        for block in self.blocks():
            out[at:at + block.size] = block
            at += block.size
        return out

    def blocks(self, size: int = BLOCK) -> Iterator[np.ndarray]:
        """The values in order, about `size` at a time (uint32 or float64 arrays): a spilled
        column's read back from its file, then views of the typed array in memory. Read the
        blocks before appending more values."""
        data = self._typed()
        dtype = _DTYPES[data.typecode]
        if self._spilled:
            yield from self._file_blocks(data.typecode, size)
        whole = np.frombuffer(data, dtype=dtype) if len(data) else np.zeros(0, dtype)
        for a in range(0, whole.size, size):
            yield whole[a:a + size]

    def extend_raw(self, typecode: str, raw: bytes) -> None:
        """Append the values in `raw`, a typed array's bytes (`typecode` "I" or "d", checked by
        the caller), leaving the same typed array as appending them one by one: uint32 while
        both are, else float64 (exact). One buffer copy when the types agree."""
        data = self._typed()
        if typecode == data.typecode:
            data.frombytes(raw)
        elif typecode == "d":  # float64 values after uint32 ones: the column widens
            self._widen().frombytes(raw)
        else:  # uint32 values after float64 ones
            data.frombytes(np.frombuffer(raw, dtype=np.uint32).astype(np.float64).tobytes())
        self._spill_full()

    def readable(self) -> np.ndarray | FileArray:
        """Every value, for reads by slice and index (`FileArray`'s): a spilling column moves its
        values still in memory to its file and returns the file's `FileArray`; otherwise the
        typed array's view (`array`). Append nothing while the result is in use."""
        data = self._typed()
        if len(data):
            self._spill_full(force=True)  # the tail too
        if self._spill is None or self._file is None or len(self._data):
            return self.array()
        return self._in_file(self._data.typecode)

    def close(self) -> None:
        """Remove the spill file (the values in it are gone)."""
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()
            self._file = None

    def __del__(self) -> None:  # a dropped column's file goes with it (unnamed: the system frees it)
        self.close()


__all__ = ["Column", "FileArray"]
