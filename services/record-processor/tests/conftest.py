"""Fixtures of the record-processor tests: anyio backend, a short IPC dir, a ZMQ context."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
import zmq.asyncio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    # tmp_path is too long for AF_UNIX paths (108 bytes); keep IPC paths short.
    path = tempfile.mkdtemp(prefix="airp-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def zctx() -> Iterator[zmq.asyncio.Context]:
    context = zmq.asyncio.Context()
    yield context
    context.destroy(linger=0)
