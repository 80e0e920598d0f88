"""Connecting through a kubeconfig (`aiperf.kubeapi.config`): one-line errors for what the user
can fix, the namespace rule, and an API server that is not there."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiperf.kubeapi import KubeError, connect, context_namespace, resolve_namespace
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=[NS], default_namespace=NS) as fake:
        yield fake


async def test_load_client_names_a_missing_kubeconfig_and_an_unknown_context(
        kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubeError, match=r"^kubeconfig /nope/config not found; pass --kubeconfig PATH"):
        await connect("/nope/config", None)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(KubeError, match=r"^no kubeconfig found at .*absent; pass --kubeconfig PATH or set "
                                        r"KUBECONFIG$"):
        await connect(None, None)
    with pytest.raises(KubeError, match=r"^context 'prod' not found in kubeconfig .*; use one of: fake$"):
        await connect(kube.kubeconfig_path, "prod")
    monkeypatch.setenv("KUBECONFIG", kube.kubeconfig_path)
    async with await connect(None, "fake") as client:
        assert client.host == kube.url
    assert resolve_namespace(None, None, None) == NS
    assert resolve_namespace("other", None, None) == "other"
    bare = kube.write_kubeconfig(tmp_path / "bare", context="bare")
    config = json.loads(bare.read_text())
    del config["contexts"][0]["context"]["namespace"]
    bare.write_text(json.dumps(config))
    assert context_namespace(str(bare), None) is None
    assert resolve_namespace(None, str(bare), None) == "default"


async def test_a_server_that_is_not_there_is_one_clear_error(tmp_path: Path) -> None:
    async with FakeKube() as fake:
        config = fake.write_kubeconfig(tmp_path / "config")
    async with await connect(str(config), None) as client:
        with pytest.raises(KubeError, match=r"^cannot reach the Kubernetes API server at http://127.0.0.1:"):
            await client.request("GET", "/api/v1/namespaces/bench")
