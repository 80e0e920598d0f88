"""Fixtures of the sweep-controller tests: the anyio backend, a FakeKube with both CRDs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import new_client_from_config

from aiperf.kube.crd import build_crd
from aiperf.kube.crd_model import JOB_KIND, SWEEP_KIND
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
async def api(kube: FakeKube) -> AsyncIterator[ApiClient]:
    client = await new_client_from_config(kube.kubeconfig_path, persist_config=False)
    yield client
    await client.close()
