"""Fixtures: the anyio backend and a factory of real mock-server subprocesses."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from aiperf.mock_server.testing import MockProcess


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def start_mock() -> Iterator[Callable[..., MockProcess]]:
    """``start_mock(*flags)`` starts a healthy server; every one still running is stopped at teardown."""
    started: list[MockProcess] = []

    def start(*flags: str) -> MockProcess:
        server = MockProcess(*flags).start()
        started.append(server)
        return server

    yield start
    for server in started:
        if server.running:
            server.stop()
