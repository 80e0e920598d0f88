"""Connecting to a cluster: the API client from `--kubeconfig`/`--kube-context`, the namespace,
and the one error type every Kubernetes operation raises for a problem the user can fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException, list_kube_config_contexts, new_client_from_config

DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeError(Exception):
    """A Kubernetes operation failed in a way the user can act on. `str(exc)` is one line that
    names the problem and the fix (the CLI prints it and exits 2)."""


class KubeClusterError(KubeError):
    """The cluster failed rather than the user's input: the API server is unreachable, answered
    an unexpected error, or a run's object vanished meanwhile (the CLI prints it and exits 1)."""


def kubeconfig_paths(kubeconfig: str | None) -> list[Path]:
    """The kubeconfig files that would be read: `kubeconfig`, else `$KUBECONFIG` (a ':'-separated
    list), else `~/.kube/config`; only the ones that exist."""
    spec = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    return [Path(p).expanduser() for p in spec.split(os.pathsep) if p and Path(p).expanduser().is_file()]


def _config_file(kubeconfig: str | None) -> str:
    """The file (or ':'-list) to hand to kubernetes_asyncio; KubeError when none exists."""
    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        raise KubeError(f"kubeconfig {kubeconfig} not found; pass --kubeconfig PATH to an existing file")
    paths = kubeconfig_paths(kubeconfig)
    if not paths:
        where = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        raise KubeError(f"no kubeconfig found at {where}; pass --kubeconfig PATH or set KUBECONFIG")
    return os.pathsep.join(str(p) for p in paths)


def _context(config_file: str, context: str | None) -> dict[str, Any]:
    """The kubeconfig context `context` (the current one when None); KubeError when unknown."""
    try:
        contexts, current = list_kube_config_contexts(config_file)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
        raise KubeError(f"cannot read kubeconfig {config_file}: {exc}") from None
    names = [c.get("name") for c in contexts or []]
    if context is None:
        if not current:
            raise KubeError(f"kubeconfig {config_file} has no current context; pass --kube-context NAME "
                            f"(one of: {', '.join(names) or 'none defined'})")
        return dict(current)
    for c in contexts or []:
        if c.get("name") == context:
            return dict(c)
    raise KubeError(f"context {context!r} not found in kubeconfig {config_file}; "
                    f"use one of: {', '.join(names) or 'none defined'}")


async def load_client(kubeconfig: str | None, context: str | None) -> ApiClient:
    """An ApiClient for `context` (None: the current one) of `kubeconfig` (None: `$KUBECONFIG` or
    `~/.kube/config`). Never writes the kubeconfig back. The caller closes the client
    (`async with client:`). Raises KubeError for a missing file or an unknown context."""
    config_file = _config_file(kubeconfig)
    ctx = _context(config_file, context)
    try:
        return await new_client_from_config(config_file=config_file, context=ctx["name"],
                                            persist_config=False)
    except ConfigException as exc:
        raise KubeError(f"cannot use context {ctx['name']!r} of kubeconfig {config_file}: {exc}") from None


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The default namespace set on the kubeconfig context, if any (KubeError as `load_client`)."""
    ctx = _context(_config_file(kubeconfig), context)
    namespace = (ctx.get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


def resolve_namespace(namespace: str | None, kubeconfig: str | None, context: str | None) -> str:
    """`--namespace` if given, else the context's namespace, else `default` (kubectl's rule)."""
    return namespace or context_namespace(kubeconfig, context) or "default"


def api_status(exc: ApiException) -> tuple[int, str, str]:
    """(HTTP status, reason, message) of an API error, from the server's `Status` body when it
    sent one (e.g. (409, "AlreadyExists", 'jobsets.jobset.x-k8s.io "aiperf-x" already exists'))."""
    reason, message = str(exc.reason or ""), ""
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    if isinstance(body, dict) and body.get("kind") == "Status":
        reason = body.get("reason") or reason
        message = body.get("message") or ""
        causes = (body.get("details") or {}).get("causes") or []
        if causes and causes[0].get("message"):
            message = f"{message}: {causes[0]['message']}" if message else causes[0]["message"]
    return int(exc.status or 0), reason, message or reason


__all__ = ["KubeClusterError", "KubeError", "api_status", "context_namespace", "kubeconfig_paths",
           "load_client", "resolve_namespace"]
