"""Fixtures: the anyio backend, and a running `Api` on 127.0.0.1 fed by a fake event source."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._api_fakes import Serving, make_serving


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def serving(tmp_path: Path) -> Serving:
    """``async with serving(kubernetes=False) as running:`` see `make_serving`."""
    return make_serving(tmp_path)
