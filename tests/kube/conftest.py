"""Fixtures of the podman tier (opt-in: `PODMAN_E2E` marks every test module here): asyncio for
the async tests, and a clear failure when a test is due to run but an image is missing."""

from __future__ import annotations

import pytest
from kube._podman import missing_images


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def _images() -> None:
    missing = missing_images()
    if missing:
        pytest.fail(f"AIPERF_PODMAN_E2E=1 but images are missing: {', '.join(missing)} "
                    "(run scripts/images/ci.sh and ./pants package mock:image)")
