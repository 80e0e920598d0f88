"""The one error this package raises for user mistakes in dataset options or files."""

from __future__ import annotations


class DatasetError(Exception):
    """A dataset that cannot be built or read; the message is one line, naming file and line.

    Example: ``data.jsonl:17: not valid JSON: unexpected character``.
    """
