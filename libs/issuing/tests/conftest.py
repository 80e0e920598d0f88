"""Fixtures of the issuing tests."""

from __future__ import annotations

import pytest

from tests._pods import ipc_dir  # noqa: F401  (a fixture)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio only: the code runs on asyncio (pyzmq asyncio sockets)."""
    return "asyncio"
