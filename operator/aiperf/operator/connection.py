"""How the operator reaches the API server: in-cluster (the pod's ServiceAccount token) or a
kubeconfig (`aiperf.kubeapi.load_configuration`), for both kopf (`ConnectionInfo`, via its login
handler) and our own `KubeApi`. Both are built from one `Configuration`, so they always agree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import kopf
from kubernetes_asyncio.client import Configuration

from aiperf.kubeapi import KubeApi, client_of

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def connection_info(config: Configuration, default_namespace: str | None = None) -> kopf.ConnectionInfo:
    """kopf's view of `config`: server, CA, client certificate or bearer token."""
    auth = (config.api_key or {}).get("authorization") or (config.api_key or {}).get("BearerToken")
    scheme, token = None, None
    if auth:
        scheme, _, token = auth.partition(" ") if " " in auth else ("Bearer", "", auth)
    return kopf.ConnectionInfo(
        server=config.host or "", ca_path=config.ssl_ca_cert or None, insecure=not config.verify_ssl,
        certificate_path=config.cert_file or None, private_key_path=config.key_file or None,
        scheme=scheme, token=token, default_namespace=default_namespace)


def pod_namespace() -> str | None:
    """The namespace of the pod the operator runs in, when in a cluster."""
    try:
        return NAMESPACE_FILE.read_text().strip() or None
    except OSError:
        return None


def client_factory(config: Configuration) -> Callable[[], Awaitable[KubeApi]]:
    """A coroutine function returning a new `KubeApi` over `config`; call it in the event loop
    that will use the client (aiohttp sessions belong to one loop). The caller closes it."""

    async def connect() -> KubeApi:
        return client_of(config)

    return connect
