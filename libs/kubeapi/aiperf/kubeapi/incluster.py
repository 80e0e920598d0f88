"""A pod's own connection to its cluster's API server, without kubernetes_asyncio's loader.

    config = InClusterConfig.from_env(os.environ)   # KUBERNETES_SERVICE_HOST/PORT + the mounted token and CA
    async with in_cluster(config) as api:            # a KubeApi, each request bounded by 5 s
        cr = await api.get(resource, "ns", "name")

This is how the run's controller pod writes its AIPerfJob's status: a few requests on one object
every few seconds, one small session, an explicit deadline on every request.

Contract: requests go to `https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`, verified
against the ServiceAccount CA (`ca.crt`), authenticated with the ServiceAccount token (`token`),
both under `/var/run/secrets/kubernetes.io/serviceaccount`; the token is read again on every
request (the kubelet rotates bound tokens in place). Tests point `server` at a plain `http://`
fake with `ca_path=None`.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from aiperf.kubeapi.client import KubeApi
from aiperf.kubeapi.errors import KubeError, Unreachable

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV, PORT_ENV = "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"
DEFAULT_TIMEOUT_S = 5.0


class InClusterError(KubeError):
    """This process cannot reach its cluster the in-cluster way; the message says what is missing."""


@dataclass(frozen=True)
class InClusterConfig:
    """Where the API server is (`server`, a URL), the token file and the CA bundle (None: the
    server is plain HTTP, tests only)."""

    server: str
    token_path: Path
    ca_path: Path | None

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, sa_dir: Path = SERVICE_ACCOUNT_DIR) -> InClusterConfig:
        """The config a pod has: `KUBERNETES_SERVICE_HOST`/`_PORT` and the mounted token and
        CA. Raises `InClusterError` naming what is missing."""
        host, port = env.get(HOST_ENV), env.get(PORT_ENV)
        if not host or not port:
            raise InClusterError(f"not running in a Kubernetes pod: {HOST_ENV} and {PORT_ENV} are not set")
        token, ca = sa_dir / "token", sa_dir / "ca.crt"
        for path in (token, ca):
            if not path.is_file():
                raise InClusterError(f"no ServiceAccount {path.name} at {path}: is automountServiceAccountToken off?")
        bracketed = f"[{host}]" if ":" in host else host
        return cls(server=f"https://{bracketed}:{port}", token_path=token, ca_path=ca)


class _InClusterTransport:
    """One session to the API server of `config` (created on first use, in the event loop),
    authenticated with the token file read anew per request."""

    proxy = None
    hint = ""

    def __init__(self, config: InClusterConfig) -> None:
        self._config, self.host = config, config.server
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            context: ssl.SSLContext | bool = False
            if self._config.ca_path is not None:
                context = ssl.create_default_context(cafile=str(self._config.ca_path))
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=2))
        return self._session

    async def auth_headers(self) -> dict[str, str]:
        try:
            token = self._config.token_path.read_text().strip()
        except OSError as exc:
            raise Unreachable(f"cannot read the ServiceAccount token {self._config.token_path}: "
                              f"{exc.strerror or exc}") from None
        return {"Authorization": f"Bearer {token}"}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def in_cluster(config: InClusterConfig, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> KubeApi:
    """A client of the API server of `config` (see the module doc); every request bounded by
    `timeout_s`. Use it as an async context manager (it closes its session)."""
    return KubeApi(_InClusterTransport(config), timeout_s=timeout_s)


__all__ = ["DEFAULT_TIMEOUT_S", "HOST_ENV", "PORT_ENV", "SERVICE_ACCOUNT_DIR", "InClusterConfig", "InClusterError",
           "in_cluster"]
