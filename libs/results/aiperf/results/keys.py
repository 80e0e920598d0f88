"""Run keys: the `<epoch>` directory name of one stored run, and how keys order.

A key is the run's creation time in whole epoch seconds (9 or 10 digits), optionally followed by
exactly six more digits (`EPOCH_RE`): the real microseconds of a fractional creation time, or a
deterministic number derived from the CR's immutable `metadata.uid`, so that a CR deleted and
created again within one wall-clock second lands in its own directory. Every route and every
directory scan accepts only names matching `EPOCH_RE`.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

EPOCH_RE = re.compile(r"\A\d{9,10}(\d{6})?\Z", re.ASCII)
"""A valid run key (whole seconds, optionally with the single six-digit suffix)."""

SUFFIX_DIGITS = 6


def is_key(text: str) -> bool:
    """`text` is a valid run key (no disk access, no exceptions)."""
    return EPOCH_RE.match(text) is not None


def uid_suffix(uid: str) -> str:
    """The six-digit suffix of the run of CR `uid` (stable across processes and restarts)."""
    digest = hashlib.sha256(uid.encode()).digest()
    return f"{int.from_bytes(digest[:8], 'big') % 10**SUFFIX_DIGITS:06d}"


def run_key(created: str | datetime, uid: str | None) -> str:
    """The key of a run created at `created` (RFC 3339 text or an aware datetime) by CR `uid`:
    seconds + the real microseconds when the time has a fraction, else seconds + `uid_suffix`,
    else (no uid) the bare seconds. ValueError when `created` is not a time or yields a key
    that `EPOCH_RE` refuses (before 1973, after 2286): such a run cannot be stored."""
    when = created if isinstance(created, datetime) else datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    seconds = int(when.timestamp() // 1)
    if when.microsecond:
        key = f"{seconds}{when.microsecond:06d}"
    elif uid:
        key = f"{seconds}{uid_suffix(uid)}"
    else:
        key = str(seconds)
    if not is_key(key):
        raise ValueError(f"creation time {created} gives run key {key!r}, which is not storable")
    return key


def wall_seconds(key: str) -> int:
    """The whole epoch seconds of a valid key (its suffix dropped)."""
    return int(key[:-SUFFIX_DIGITS] if len(key) > 10 else key)


def order(key: str) -> tuple[int, str]:
    """Sort key of run keys: by wall-clock second, then by the full key (the suffix spaces of
    uid-derived and microsecond keys overlap, so the suffix only breaks ties)."""
    return wall_seconds(key), key.rjust(16, "0")


__all__ = ["EPOCH_RE", "is_key", "order", "run_key", "uid_suffix", "wall_seconds"]
