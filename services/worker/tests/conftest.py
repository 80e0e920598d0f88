"""Fixtures of the worker tests: anyio backend, a short IPC dir, a ZMQ context, a dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiperf.dataset import Conversation, Turn, write_dataset
from aiperf.testing.fixtures import ipc_dir, zctx

__all__ = ["ipc_dir", "zctx"]

MODES = ("stream", "error500", "drop", "hang", "json")
"""Single-turn conversations whose id and prompt name what the test server does."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"




@pytest.fixture
def dataset_dir(tmp_path: Path) -> str:
    conversations = [Conversation(id=mode, turns=[Turn(text=mode, input_tokens=7, max_tokens=3)])
                     for mode in MODES]
    conversations.append(Conversation(id="multi", turns=[
        Turn(text="stream", input_tokens=1, max_tokens=3),
        Turn(text="stream", input_tokens=2, max_tokens=3),
        Turn(text="stream", input_tokens=3, max_tokens=3)]))
    return write_dataset(tmp_path / "dataset", conversations).directory
