"""All objects of a run in creation order, their YAML, and the check that no secret leaked."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

from aiperf.config import RunConfig
from aiperf.kube.config_map import build_config_map
from aiperf.kube.curve_secret import build_curve_secret
from aiperf.kube.jobset import build_jobset
from aiperf.kube.rbac import build_role, build_role_binding, build_service_account
from aiperf.kube.settings import API_KEY_ENV, HEADERS_ENV, KubeConfigError, KubeSettings

MIN_CHECKED_SECRET_LEN = 6
"""Shorter secret values are not searched for: they occur in ordinary text by chance."""


def build_all(settings: KubeSettings, run_config: RunConfig, *,
              known_secrets: Iterable[str] = ()) -> list[dict[str, Any]]:
    """[ServiceAccount,] Role, RoleBinding, the CURVE key Secret (without data: `with_curve_keys`
    fills it at creation), ConfigMap, JobSet: the objects to create, in that order (the
    ServiceAccount unless the settings name an existing one).

    Raises `KubeConfigError` when the run needs a secret that no Secret reference supplies, or
    when any of `known_secrets` (secret values the caller holds, e.g. from
    `secret_values_from_env`) appears anywhere in the objects."""
    account = build_service_account(settings)
    objects = [*([account] if account else []), build_role(settings), build_role_binding(settings),
               build_curve_secret(settings),
               build_config_map(settings, run_config), build_jobset(settings, run_config)]
    check_no_secrets(objects, known_secrets)
    return objects


def secret_values_from_env(env: Mapping[str, str]) -> list[str]:
    """The secret values in `env`: `AIPERF_API_KEY` and the values of the `AIPERF_HEADERS_JSON`
    object (ignored when it is not a JSON object: the services reject it themselves)."""
    values = [env[API_KEY_ENV]] if env.get(API_KEY_ENV) else []
    try:
        headers = json.loads(env.get(HEADERS_ENV) or "{}")
    except ValueError:
        headers = {}
    if isinstance(headers, dict):
        values += [v for v in headers.values() if isinstance(v, str) and v]
    return values


def check_no_secrets(objects: Iterable[Mapping[str, Any]], known_secrets: Iterable[str]) -> None:
    """Raise `KubeConfigError` when a secret value (of at least `MIN_CHECKED_SECRET_LEN`
    characters) occurs in any string of `objects`, keys included; the message never shows it."""
    secrets = [s for s in known_secrets if len(s) >= MIN_CHECKED_SECRET_LEN]
    if not secrets:
        return
    for obj in objects:
        for text in _strings(obj):
            if any(secret in text for secret in secrets):
                kind, name = obj.get("kind", "?"), obj.get("metadata", {}).get("name", "?")
                raise KubeConfigError(f"a secret value would be written into {kind} {name}: pass secrets "
                                      "as Secret references (api_key_secret, headers_secret, "
                                      "env_from_secrets), never as values")


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list | tuple):
        for item in node:
            yield from _strings(item)


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings (the run config JSON) as `|` literals; no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """`objects` as one multi-document YAML stream (`---` between documents). Keys keep the
    builders' order (apiVersion, kind, metadata, then the body), so equal input gives equal text."""
    return yaml.dump_all([dict(o) for o in objects], Dumper=_Dumper, sort_keys=False,
                         default_flow_style=False, explicit_start=True, width=100)
