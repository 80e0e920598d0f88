"""Connecting to a cluster: from a kubeconfig (`--kubeconfig`/`--kube-context`, `$KUBECONFIG`,
`~/.kube/config`), or from inside a pod (its ServiceAccount), and the namespace to use.

    async with await connect(kubeconfig=None, context=None) as api: ...      # the CLI
    api = KubeApi.over(ApiClient(await load_configuration(None)))            # the operator, sweep-controller
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from aiperf.kubeapi.client import KubeApi
from aiperf.kubeapi.errors import KubeError
from aiperf.kubeapi.incluster import HOST_ENV

if TYPE_CHECKING:  # kubernetes_asyncio takes a second to import: imported where it is used
    from kubernetes_asyncio.client import Configuration

DEFAULT_KUBECONFIG = "~/.kube/config"


def kubeconfig_paths(kubeconfig: str | None) -> list[Path]:
    """The kubeconfig files that would be read: `kubeconfig`, else `$KUBECONFIG` (a ':'-separated
    list), else `~/.kube/config`; only the ones that exist."""
    spec = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    return [Path(p).expanduser() for p in spec.split(os.pathsep) if p and Path(p).expanduser().is_file()]


def config_file(kubeconfig: str | None) -> str:
    """The file (or ':'-list) to read; KubeError when `kubeconfig` is missing or none exists."""
    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        raise KubeError(f"kubeconfig {kubeconfig} not found; pass --kubeconfig PATH to an existing file")
    paths = kubeconfig_paths(kubeconfig)
    if not paths:
        where = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        raise KubeError(f"no kubeconfig found at {where}; pass --kubeconfig PATH or set KUBECONFIG")
    return os.pathsep.join(str(p) for p in paths)


def kube_context(kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    """The kubeconfig context `context` (the current one when None); KubeError when the file
    cannot be read or the context is unknown."""
    from kubernetes_asyncio.config import ConfigException, list_kube_config_contexts

    path = config_file(kubeconfig)
    try:
        contexts, current = list_kube_config_contexts(path)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
        raise KubeError(f"cannot read kubeconfig {path}: {exc}") from None
    names = [c.get("name") for c in contexts or []]
    if context is None:
        if not current:
            raise KubeError(f"kubeconfig {path} has no current context; pass --kube-context NAME "
                            f"(one of: {', '.join(names) or 'none defined'})")
        return dict(current)
    for c in contexts or []:
        if c.get("name") == context:
            return dict(c)
    raise KubeError(f"context {context!r} not found in kubeconfig {path}; "
                    f"use one of: {', '.join(names) or 'none defined'}")


async def connect(kubeconfig: str | None, context: str | None) -> KubeApi:
    """A client for `context` (None: the current one) of `kubeconfig` (None: `$KUBECONFIG` or
    `~/.kube/config`). Never writes the kubeconfig back. The caller closes it (`async with`).
    Raises KubeError for a missing file or an unknown context."""
    from kubernetes_asyncio.config import ConfigException, new_client_from_config

    path = config_file(kubeconfig)
    name = kube_context(kubeconfig, context)["name"]
    try:
        client = await new_client_from_config(config_file=path, context=name, persist_config=False)
    except ConfigException as exc:
        raise KubeError(f"cannot use context {name!r} of kubeconfig {path}: {exc}") from None
    return KubeApi.over(client)


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The default namespace set on the kubeconfig context, if any (KubeError as `connect`)."""
    namespace = (kube_context(kubeconfig, context).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


def resolve_namespace(namespace: str | None, kubeconfig: str | None, context: str | None) -> str:
    """`--namespace` if given, else the context's namespace, else `default` (kubectl's rule)."""
    return namespace or context_namespace(kubeconfig, context) or "default"


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> Configuration:
    """The client configuration of a long-running process: `kubeconfig` when given; else
    in-cluster when running in a pod (`KUBERNETES_SERVICE_HOST` set); else `$KUBECONFIG` or
    `~/.kube/config`. Raises `KubeError` (one line) when none of them can be used."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config

    config = Configuration()
    try:
        if kubeconfig is None and os.environ.get(HOST_ENV):
            load_incluster_config(client_configuration=config)
            return config
        if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
            raise KubeError(f"kubeconfig {kubeconfig} not found; pass --kubeconfig PATH to an existing file")
        paths = kubeconfig_paths(kubeconfig)
        if not paths:
            raise KubeError("not in a cluster and no kubeconfig found; pass --kubeconfig PATH or set KUBECONFIG")
        await load_kube_config(config_file=os.pathsep.join(map(str, paths)), context=context,
                               client_configuration=config, persist_config=False)
    except (ConfigException, OSError, ValueError) as exc:
        raise KubeError(f"cannot load the Kubernetes configuration: {exc}") from None
    return config


def client_of(config: Configuration) -> KubeApi:
    """A new client over `config`; create it in the event loop that uses it (an aiohttp session
    belongs to one loop). The caller closes it."""
    from kubernetes_asyncio.client import ApiClient

    return KubeApi.over(ApiClient(configuration=config))


__all__ = ["DEFAULT_KUBECONFIG", "client_of", "config_file", "connect", "context_namespace", "kube_context",
           "kubeconfig_paths", "load_configuration", "resolve_namespace"]
