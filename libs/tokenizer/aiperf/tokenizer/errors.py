"""The one error this package raises for user mistakes."""

from __future__ import annotations


class TokenizerError(Exception):
    """A ``--tokenizer`` value that cannot be loaded; the message is one line naming the fix."""
