"""Fixtures: the anyio backend."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """No fsync in these tests (the 2-core CI disk makes each one cost milliseconds); what is
    written and renamed is the same."""
    from aiperf.results import disk

    monkeypatch.setattr(disk, "DURABLE", False)
