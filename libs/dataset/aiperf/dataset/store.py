"""On-disk dataset shared by many processes: ``dataset.dat`` + ``index.dat``, memory-mapped.

``dataset.dat`` is the msgpack encoding of each `Conversation`, back to back.
``index.dat`` (little-endian) is a 32-byte header ``magic, count, data_size, ids_offset``, then
``count`` fixed 32-byte records ``offset u64, length u64, first_timestamp_ms f64 (NaN: none),
id_offset u32, id_length u32``, then the UTF-8 conversation ids back to back (at ``ids_offset``).
Optional ``.zst`` copies of both files serve the Kubernetes download path.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import msgspec
import zstandard

from aiperf.dataset.errors import DatasetError
from aiperf.dataset.model import Conversation

DATA_FILE = "dataset.dat"
INDEX_FILE = "index.dat"
ZST_SUFFIX = ".zst"
MAGIC = b"AIPFIDX1"
HEADER = struct.Struct("<8sQQQ")
RECORD = struct.Struct("<QQdII")
_SPAN = struct.Struct("<QQ")  # the first two fields of RECORD: all the hot path needs
ZSTD_LEVEL = 3


class DatasetFiles(msgspec.Struct, frozen=True, kw_only=True):
    """Where a written dataset lives (absolute paths) and what it holds."""

    directory: str
    data: str
    index: str
    count: int
    data_bytes: int
    data_zst: str | None = None
    index_zst: str | None = None


def write_dataset(directory: str | os.PathLike[str], conversations: Iterable[Conversation], *,
                  compress: bool = False) -> DatasetFiles:
    """Write ``dataset.dat`` and ``index.dat`` (and their ``.zst`` copies when ``compress``).

    Creates ``directory`` if needed. Each file appears atomically (written under a temporary
    name, then renamed), so a concurrent `DatasetReader` never sees a half-written file. Blocks.
    """
    folder = Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    encoder = msgspec.msgpack.Encoder()
    spans: list[tuple[int, int, float]] = []
    ids: list[bytes] = []
    offset = 0
    with _AtomicFile(folder / DATA_FILE) as out:
        for conversation in conversations:
            blob = encoder.encode(conversation)
            out.write(blob)
            first = conversation.turns[0].timestamp_ms if conversation.turns else None
            spans.append((offset, len(blob), math.nan if first is None else first))
            ids.append(conversation.id.encode())
            offset += len(blob)
    ids_offset = HEADER.size + RECORD.size * len(spans)
    with _AtomicFile(folder / INDEX_FILE) as out:
        out.write(HEADER.pack(MAGIC, len(spans), offset, ids_offset))
        id_offset = 0
        for (start, length, timestamp), raw_id in zip(spans, ids, strict=True):
            out.write(RECORD.pack(start, length, timestamp, id_offset, len(raw_id)))
            id_offset += len(raw_id)
        out.write(b"".join(ids))
    data_zst = index_zst = None
    if compress:
        data_zst, index_zst = (str(_compress(folder / name)) for name in (DATA_FILE, INDEX_FILE))
    return DatasetFiles(directory=str(folder), data=str(folder / DATA_FILE), index=str(folder / INDEX_FILE),
                        count=len(spans), data_bytes=offset, data_zst=data_zst, index_zst=index_zst)


def decompress_file(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Stream-decompress the zstd file ``source`` to ``target`` (atomically); `DatasetError` if
    ``source`` is unreadable or not valid zstd."""
    try:
        with open(source, "rb") as src, _AtomicFile(Path(target)) as dst:
            zstandard.ZstdDecompressor().copy_stream(src, dst)
    except (OSError, zstandard.ZstdError) as exc:
        raise DatasetError(f"{source}: cannot decompress: {exc}") from exc


def decompress_dataset(zst_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> DatasetFiles:
    """Decompress ``dataset.dat.zst`` and ``index.dat.zst`` from ``zst_dir`` into ``out_dir``.

    Checks the result opens (header and sizes) and returns its `DatasetFiles` (no ``.zst``
    paths). Raises `DatasetError` for a missing, corrupt or mismatched pair.
    """
    source, target = Path(zst_dir), Path(out_dir).resolve()
    target.mkdir(parents=True, exist_ok=True)
    for name in (DATA_FILE, INDEX_FILE):
        decompress_file(source / (name + ZST_SUFFIX), target / name)
    with DatasetReader(target) as reader:
        count, data_bytes = len(reader), reader.data_bytes
    return DatasetFiles(directory=str(target), data=str(target / DATA_FILE), index=str(target / INDEX_FILE),
                        count=count, data_bytes=data_bytes)


class DatasetReader:
    """Read-only, memory-mapped view of a written dataset; cheap to open in every worker.

    ``conversation(i)`` costs one index lookup and one msgpack decode (a few µs for a typical
    conversation) and does no I/O beyond page faults. Not thread-safe across `close`; use as a
    context manager or call `close`.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        """Map ``directory``'s files; raises `DatasetError` if they are missing or inconsistent."""
        folder = Path(directory)
        self._data_map: mmap.mmap | None = None
        self._index_map: mmap.mmap | None = None
        self._data = memoryview(b"")
        try:
            self._data_map = _map(folder / DATA_FILE)
            self._index_map = _map(folder / INDEX_FILE)
            if self._data_map is not None:
                self._data = memoryview(self._data_map)
            index = self._index_map
            if index is None or len(index) < HEADER.size:
                raise DatasetError(f"{folder / INDEX_FILE}: truncated (no header)")
            magic, count, data_bytes, ids_offset = HEADER.unpack_from(index, 0)
            if magic != MAGIC or ids_offset != HEADER.size + RECORD.size * count or len(index) < ids_offset:
                raise DatasetError(f"{folder / INDEX_FILE}: not an aiperf dataset index or truncated")
            if data_bytes != len(self._data):
                raise DatasetError(f"{folder / DATA_FILE}: {len(self._data)} bytes, index expects {data_bytes}")
        except DatasetError:
            self.close()
            raise
        self._index = index
        self._count = count
        self.data_bytes: int = data_bytes
        self._ids_offset = ids_offset
        self._decoder = msgspec.msgpack.Decoder(Conversation)
        self._ids: list[str] | None = None
        self._positions: dict[str, int] | None = None

    def __len__(self) -> int:
        return self._count

    def conversation(self, i: int) -> Conversation:
        """The ``i``-th conversation (0 <= i < len); ``IndexError`` otherwise."""
        if not 0 <= i < self._count:
            raise IndexError(f"conversation {i} out of range 0..{self._count - 1}")
        offset, length = _SPAN.unpack_from(self._index, HEADER.size + RECORD.size * i)
        return self._decoder.decode(self._data[offset:offset + length])

    def conversation_by_id(self, conversation_id: str) -> Conversation:
        """The conversation named ``conversation_id``; ``KeyError`` if none. The first call builds
        an id -> position map (O(n)); later calls are O(1)."""
        if self._positions is None:
            self._positions = {cid: i for i, cid in enumerate(self.ids())}
        return self.conversation(self._positions[conversation_id])

    def ids(self) -> list[str]:
        """All conversation ids in storage order (decoded once, then cached; do not mutate)."""
        if self._ids is None:
            blob_start = self._ids_offset
            ids = []
            for i in range(self._count):
                *_, id_offset, id_length = RECORD.unpack_from(self._index, HEADER.size + RECORD.size * i)
                start = blob_start + id_offset
                ids.append(bytes(self._index[start:start + id_length]).decode())
            self._ids = ids
        return self._ids

    def timestamps(self) -> list[float | None]:
        """Each conversation's first-turn ``timestamp_ms`` (None where absent), in storage order."""
        out: list[float | None] = []
        for i in range(self._count):
            timestamp = RECORD.unpack_from(self._index, HEADER.size + RECORD.size * i)[2]
            out.append(None if math.isnan(timestamp) else timestamp)
        return out

    def close(self) -> None:
        """Unmap the files; idempotent. Conversations already returned stay valid."""
        self._data.release()
        for mapped in (self._data_map, self._index_map):
            if mapped is not None:
                mapped.close()
        self._data_map = self._index_map = None

    def __enter__(self) -> DatasetReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _map(path: Path) -> mmap.mmap | None:
    """Map ``path`` read-only; None for an empty file (mmap cannot map zero bytes)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot open dataset file: {exc.strerror or exc}") from exc


def _compress(path: Path) -> Path:
    target = path.with_name(path.name + ZST_SUFFIX)
    with open(path, "rb") as src, _AtomicFile(target) as dst:
        zstandard.ZstdCompressor(level=ZSTD_LEVEL).copy_stream(src, dst)
    return target


class _AtomicFile:
    """Open ``path + '.tmp'`` for writing; on success rename it over ``path``, else delete it."""

    def __init__(self, path: Path) -> None:
        self._path, self._tmp = path, path.with_name(path.name + ".tmp")

    def __enter__(self) -> BinaryIO:
        self._file = open(self._tmp, "wb")  # closed in __exit__
        return self._file

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._file.close()  # flushes: on a full disk this is where the write fails
            if exc_type is None:
                os.replace(self._tmp, self._path)
        finally:
            if self._tmp.exists():  # failed before or in the rename: no half-written file stays
                self._tmp.unlink()

