"""Fixtures of the sweep-controller tests: the anyio backend, a FakeKube with both CRDs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.kubeapi import KubeApi, connect
from aiperf.testing.fake_kube import FakeKube


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=["bench"]) as fake:
        fake.install_crd(build_crd(JOB_KIND))
        fake.install_crd(build_crd(SWEEP_KIND))
        yield fake


@pytest.fixture
async def api(kube: FakeKube) -> AsyncIterator[KubeApi]:
    async with await connect(kube.kubeconfig_path, None) as client:
        yield client
