"""Fixtures of the kubeapi tests (helpers are fixtures: pytest does not put this folder on
sys.path for conftest imports)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio only: the code runs on asyncio."""
    return "asyncio"
