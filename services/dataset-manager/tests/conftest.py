"""Fixtures shared by the tests below this folder."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio only: the code runs on asyncio (pyzmq asyncio sockets, uvloop); anyio would
    otherwise also run every test on trio, which selenium brings in."""
    return "asyncio"
