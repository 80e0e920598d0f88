"""Fixtures of the record-processor tests: anyio backend, a short IPC dir, a ZMQ context."""

from __future__ import annotations

import pytest

from aiperf.testing.fixtures import ipc_dir, zctx

__all__ = ["ipc_dir", "zctx"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
