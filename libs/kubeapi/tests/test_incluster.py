"""The in-cluster client the way a pod uses it: HTTPS to KUBERNETES_SERVICE_HOST/PORT verified
against the mounted CA, the mounted token (re-read when it rotates), error bodies kept whole.
The API server is a real TLS server on 127.0.0.1 with a certificate from a throwaway CA."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from aiperf.kubeapi import ApiError, InClusterConfig, Unreachable, in_cluster
from aiperf.testing.fake_kube_tls import make_tls_files

pytestmark = pytest.mark.anyio
OBJ_PATH = "/apis/aiperf.nvidia.com/v1alpha1/namespaces/bench/aiperfjobs/run"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str) -> None:
    """`<name>.crt`/`<name>.key`: a self-signed CA."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "1", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            cwd=directory)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for IP 127.0.0.1 it signed, and an unrelated CA."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make test certificates")
    directory = tmp_path_factory.mktemp("certs")
    make_tls_files(directory, "127.0.0.1")  # ca.crt, server.crt, server.key
    make_ca(directory, "other")
    return directory


@dataclass
class ApiServer:
    port: int
    tokens: list[str] = field(default_factory=list)


@pytest.fixture
async def api_server(certs: Path) -> AsyncIterator[ApiServer]:
    """GET of one object over TLS; 403 with a Status body for any other path; records tokens."""
    server = ApiServer(port=0)

    async def handle(request: web.Request) -> web.Response:
        server.tokens.append(request.headers.get("Authorization", ""))
        if request.path == OBJ_PATH:
            return web.json_response({"metadata": {"name": "run", "uid": "u1"}})
        return web.json_response({"kind": "Status", "reason": "Forbidden", "message": "no", "code": 403}, status=403)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "server.crt", certs / "server.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        await runner.cleanup()


def service_account(tmp_path: Path, certs: Path, ca: str = "ca") -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("token-1\n")
    shutil.copy(certs / f"{ca}.crt", sa / "ca.crt")
    return sa


async def test_a_pod_reaches_the_api_server_over_verified_tls_with_its_rotating_token(
        tmp_path: Path, certs: Path, api_server: ApiServer) -> None:
    sa = service_account(tmp_path, certs)
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api_server.port)}
    async with in_cluster(InClusterConfig.from_env(env, sa_dir=sa)) as client:
        assert (await client.request("GET", OBJ_PATH))["metadata"]["uid"] == "u1"
        (sa / "token").write_text("token-2\n")  # the kubelet rotated it
        with pytest.raises(ApiError) as exc:
            await client.request("PATCH", OBJ_PATH + "/status", body=[])
    assert api_server.tokens == ["Bearer token-1", "Bearer token-2"]
    assert exc.value.status == 403 and exc.value.reason == "Forbidden" and not exc.value.lost_race
    assert '"reason": "Forbidden"' in exc.value.body


async def test_a_server_the_mounted_ca_did_not_sign_is_not_spoken_to(
        tmp_path: Path, certs: Path, api_server: ApiServer) -> None:
    sa = service_account(tmp_path, certs, ca="other")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api_server.port)}
    async with in_cluster(InClusterConfig.from_env(env, sa_dir=sa)) as client:
        with pytest.raises(Unreachable, match="certificate"):
            await client.request("GET", OBJ_PATH)
    assert api_server.tokens == []  # the token never left the pod
