"""The fake API server over https (`tls=`): kubernetes_asyncio verifies it against the CA its
kubeconfig names, and a client that does not trust that CA is refused before any request; a
client still connected when the server exits leaves no socket behind."""

from __future__ import annotations

import shutil
import socket
import ssl
from pathlib import Path

import aiohttp
import anyio
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


def established_at(port: int) -> int:
    """TCP connections in state ESTABLISHED whose local end is 127.0.0.1:`port` (/proc/net/tcp)."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return sum(1 for row in rows if row[1] == f"0100007F:{port:04X}" and row[3] == "01")


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the kernel's TCP table (Linux)")
async def test_a_client_still_connected_at_exit_leaves_no_socket_behind(tmp_path: Path) -> None:
    """A pod that keeps its keep-alive connection and never answers the server's TLS close_notify
    (still running, or gone without a FIN): the server's end is closed by the time it exited, not
    left waiting 30 s for the answer (past the event loop's end: a ResourceWarning, which fails a
    pytest run at its end)."""
    tls = make_tls_files(tmp_path / "tls", "127.0.0.1")
    context = ssl.create_default_context(cafile=str(tls.ca))

    def connect(port: int) -> ssl.SSLSocket:  # a blocking client, outside the server's loop
        client = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
        client.sendall(b"GET /version HTTP/1.1\r\nHost: kube\r\n\r\n")
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        return client

    async with FakeKube(namespaces=["bench"], tls=tls) as kube:
        port = int(kube.url.rsplit(":", 1)[1])
        client = await anyio.to_thread.run_sync(connect, port)
        assert established_at(port) == 1
    try:
        assert established_at(port) == 0
    finally:
        client.close()
