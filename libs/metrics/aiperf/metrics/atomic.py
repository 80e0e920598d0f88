"""Files that are either whole or absent: readers (people, scripts, the results server) never
see a half-written export, also when the disk fills up or the process dies mid-write."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory: written, fsynced,
    renamed over `path`, directory fsynced. On any failure the temporary file is removed, `path`
    keeps its previous content (or stays absent) and the `OSError` propagates."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)


def fsync_dir(directory: Path) -> None:
    """Make the rename durable; some file systems cannot fsync a directory, which is harmless."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # EINVAL on file systems without directory fsync: the rename stands regardless
    finally:
        os.close(fd)


__all__ = ["fsync_dir", "write_atomic"]
