"""The one error of reading a configuration."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(Exception):
    """A benchmark or run configuration that cannot be used; the message is one line."""
