"""Fixtures of the timing-manager tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._tm_fakes import OPEN_RIGS


@pytest.fixture(autouse=True)
def _close_rigs() -> Iterator[None]:
    yield
    while OPEN_RIGS:
        OPEN_RIGS.pop().close()


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio only: the code runs on asyncio (pyzmq asyncio sockets, uvloop); anyio would
    otherwise also run every test on trio, which selenium brings in."""
    return "asyncio"

