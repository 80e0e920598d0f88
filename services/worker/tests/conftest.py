"""Fixtures of the worker tests: anyio backend, a short IPC dir, a ZMQ context, a dataset."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq.asyncio

from aiperf.dataset import Conversation, Turn, write_dataset

MODES = ("stream", "error500", "drop", "hang", "json")
"""Single-turn conversations whose id and prompt name what the test server does."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    # tmp_path is too long for AF_UNIX paths (108 bytes); keep IPC paths short.
    path = tempfile.mkdtemp(prefix="aiw-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def zctx() -> Iterator[zmq.asyncio.Context]:
    context = zmq.asyncio.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def dataset_dir(tmp_path: Path) -> str:
    conversations = [Conversation(id=mode, turns=[Turn(text=mode, input_tokens=7, max_tokens=3)])
                     for mode in MODES]
    conversations.append(Conversation(id="multi", turns=[
        Turn(text="stream", input_tokens=1, max_tokens=3),
        Turn(text="stream", input_tokens=2, max_tokens=3),
        Turn(text="stream", input_tokens=3, max_tokens=3)]))
    return write_dataset(tmp_path / "dataset", conversations).directory
