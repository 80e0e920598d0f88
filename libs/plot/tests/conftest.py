from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def data() -> Path:
    """Real exports of short runs against the mock server (data/README.md)."""
    return DATA
