"""pytest fixtures shared by service tests: import them into a conftest.py.

    from aiperf.testing.fixtures import ipc_dir, zctx  # noqa: F401
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
import zmq.asyncio


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    """A fresh short directory for IPC sockets (tmp_path is too long for AF_UNIX's 108 bytes)."""
    path = tempfile.mkdtemp(prefix="aip-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def zctx() -> Iterator[zmq.asyncio.Context]:
    """A ZMQ context destroyed (linger 0) after the test."""
    context = zmq.asyncio.Context()
    yield context
    context.destroy(linger=0)
