"""Fixtures: the anyio backend, and a FakeKube serving namespace `bench` with the AIPerfJob CRD
installed (the JobSet CRD comes with the fake)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.testing.fake_kube import FakeKube


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=["bench"]) as fake:
        fake.install_crd(build_crd(JOB_KIND))
        yield fake
