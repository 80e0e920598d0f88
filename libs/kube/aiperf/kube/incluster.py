"""A pod's own connection to its cluster's API server: in-cluster config and a minimal client.

    config = InClusterConfig.from_env(os.environ)     # KUBERNETES_SERVICE_HOST/PORT + the mounted token and CA
    async with InClusterClient(config) as client:
        cr = await client.request("GET", "/apis/aiperf.nvidia.com/v1alpha1/namespaces/ns/aiperfjobs/name")

This is how the run's controller pod writes its AIPerfJob's status. It is a few requests on
one object every few seconds, so it is a small aiohttp client rather than kubernetes_asyncio:
no generated models to import into the system-controller's image, one session, an explicit
deadline on every request, and the error body kept whole for the log (`ApiRejected`).

Contract: requests go to `https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`, verified
against the ServiceAccount CA (`ca.crt`), authenticated with the ServiceAccount token
(`token`), both under `/var/run/secrets/kubernetes.io/serviceaccount`; the token is read again
on every request (the kubelet rotates bound tokens in place). Tests point `server` at a plain
`http://` fake with `ca_path=None`.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV, PORT_ENV = "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"
JSON, JSON_PATCH = "application/json", "application/json-patch+json"

Obj = dict[str, Any]


class InClusterError(Exception):
    """This process cannot reach its cluster the in-cluster way; the message says what is missing."""


class KubeUnreachable(Exception):
    """A request got no answer (connection refused or reset, TLS failure, deadline passed)."""


class ApiRejected(Exception):
    """The API server answered a request with an error status. `status` is the HTTP code,
    `reason` and `message` come from the `Status` body (empty when it is not one; the first
    cause's message appended), `body` is the response text as received (for the log)."""

    def __init__(self, status: int, body: str) -> None:
        self.status, self.body = status, body
        try:
            doc = json.loads(body)
        except ValueError:
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        self.reason, self.message = str(doc.get("reason") or ""), str(doc.get("message") or "")
        causes = (doc.get("details") or {}).get("causes") or [{}]
        if cause := str(causes[0].get("message") or ""):  # what a failed JSON Patch op says
            self.message = f"{self.message}: {cause}" if self.message else cause
        super().__init__(f"{status} {self.reason or 'error'}: {self.message or body[:200]}")

    @property
    def lost_race(self) -> bool:
        """True when a precondition of the write no longer held: 409 Conflict (stale
        resourceVersion) or 422 for a failed JSON Patch `test` (the message names the test).
        Any other 422 (a schema violation) is not a lost race."""
        return self.status == 409 or (self.status == 422 and "testing value" in self.message
                                      and "failed" in self.message)

    @property
    def transient(self) -> bool:
        """True for an answer that says "not now" rather than "no": 429 (API Priority and
        Fairness throttling) and 5xx (an API server or etcd in trouble, restarting, timing out)."""
        return self.status == 429 or self.status >= 500


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


class InClusterClient:
    """An async context manager holding one HTTP session to the API server of `config`.

    `request` sends one request with `timeout_s` as its whole deadline and returns the decoded
    JSON answer; it raises `ApiRejected` for an error status and `KubeUnreachable` when no
    answer came. It never retries: the caller decides."""

    def __init__(self, config: InClusterConfig, *, timeout_s: float = 5.0) -> None:
        self._config, self._timeout_s = config, timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> InClusterClient:
        ssl_context: ssl.SSLContext | bool = False
        if self._config.ca_path is not None:
            ssl_context = ssl.create_default_context(cafile=str(self._config.ca_path))
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            connector=aiohttp.TCPConnector(ssl=ssl_context, limit=2))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = JSON) -> Obj:
        """`method path` (path from the server root) with `body` as JSON; see the class doc."""
        if self._session is None:
            raise RuntimeError("InClusterClient used outside `async with`")
        try:
            token = self._config.token_path.read_text().strip()
        except OSError as exc:
            raise KubeUnreachable(f"cannot read the ServiceAccount token {self._config.token_path}: "
                                  f"{exc.strerror or exc}") from None
        headers = {"Authorization": f"Bearer {token}", "Accept": JSON, "Content-Type": content_type}
        data = None if body is None else json.dumps(body)
        try:
            async with self._session.request(method, self._config.server + path, data=data,
                                             headers=headers) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise KubeUnreachable(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        if response.status >= 400:
            raise ApiRejected(response.status, text)
        answer: Obj = json.loads(text) if text else {}
        return answer
