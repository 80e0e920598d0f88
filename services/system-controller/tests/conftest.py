"""Fixtures: the anyio backend, a fake control ROUTER (closed after the test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._sc_fakes import FakeRouter


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def router() -> Iterator[FakeRouter]:
    fake = FakeRouter()
    yield fake
    fake.close()
