"""Fixtures: the anyio backend, a serving FakeKube with namespace `bench`, an ApiClient on it, and
the shared `ipc_dir`/`zctx`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import new_client_from_config

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fixtures import ipc_dir, zctx  # noqa: F401


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=["bench"]) as fake:
        yield fake


@pytest.fixture
async def api(kube: FakeKube) -> AsyncIterator[ApiClient]:
    client = await new_client_from_config(kube.kubeconfig_path, persist_config=False)
    async with client:
        yield client
