"""The fake API server over https (`tls=`): kubernetes_asyncio verifies it against the CA its
kubeconfig names, and a client that does not trust that CA is refused before any request."""

from __future__ import annotations

import shutil
import ssl
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.config import new_client_from_config

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_tls import make_tls_files

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")]


async def test_clients_reach_the_fake_over_verified_tls(tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path / "tls", "127.0.0.1")
    async with FakeKube(namespaces=["bench"], tls=tls, rbac=True) as kube:
        assert kube.url.startswith("https://127.0.0.1:")
        api = await new_client_from_config(kube.kubeconfig_path, persist_config=False)
        async with api:
            names = [ns.metadata.name for ns in (await CoreV1Api(api).list_namespace()).items]
        assert "bench" in names
        seen = len(kube.requests)
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(f"{kube.url}/api", ssl=ssl.create_default_context())
        assert len(kube.requests) == seen
