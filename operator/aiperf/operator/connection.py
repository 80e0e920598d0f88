"""How the operator reaches the API server: in-cluster (the pod's ServiceAccount token) or a
kubeconfig, for both kopf (`ConnectionInfo`, via its login handler) and our own
kubernetes_asyncio `ApiClient`. Both are built from one `Configuration`, so they always agree.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import kopf
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config

from aiperf.kube.client import KubeError, kubeconfig_paths

SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> Configuration:
    """The client configuration: `kubeconfig` when given; else in-cluster when running in a pod
    (`KUBERNETES_SERVICE_HOST` set); else `$KUBECONFIG` or `~/.kube/config`. Raises `KubeError`
    (one line) when none of them can be used."""
    config = Configuration()
    try:
        if kubeconfig is None and os.environ.get(SERVICE_HOST_ENV):
            load_incluster_config(client_configuration=config)
            return config
        paths = kubeconfig_paths(kubeconfig)
        if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
            raise KubeError(f"kubeconfig {kubeconfig} not found; pass --kubeconfig PATH to an existing file")
        if not paths:
            raise KubeError("not in a cluster and no kubeconfig found; pass --kubeconfig PATH or set KUBECONFIG")
        await load_kube_config(config_file=os.pathsep.join(map(str, paths)), context=context,
                               client_configuration=config, persist_config=False)
    except (ConfigException, OSError, ValueError) as exc:
        raise KubeError(f"cannot load the Kubernetes configuration: {exc}") from None
    return config


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


def client_factory(config: Configuration) -> Callable[[], Awaitable[ApiClient]]:
    """A coroutine function returning a new `ApiClient` over `config`; call it in the event loop
    that will use the client (aiohttp sessions belong to one loop). The caller closes it."""

    async def connect() -> ApiClient:
        return ApiClient(configuration=config)

    return connect
