"""The ConfigMap `aiperf-<name>-config`: `run_config.json` as every pod of the run reads it.

The run config given by the caller is adapted to the cluster: `kubernetes=True`; comms on the
shared IPC emptyDir with every TCP binder on 0.0.0.0 and the default ports (binders in the
controller pod serve the worker pods; connectors in worker pods switch to TCP through
`AIPERF_CONTROLLER_HOST`), authenticated with CURVE (keys from the Secret mounted at
`CURVE_DIR`); artifacts on the artifacts emptyDir, the dataset files beside them
(`<artifacts>/dataset`, served to the worker pods by the api; never among the fetched
results); service counts from the worker layout. Secrets are never in it: `RunConfig` holds header names only.
"""

from __future__ import annotations

from typing import Any

import msgspec

from aiperf.config import CommsOptions, RunConfig
from aiperf.kube.metadata import object_meta
from aiperf.kube.names import config_map_name
from aiperf.kube.settings import API_KEY_ENV, HEADERS_ENV, KubeConfigError, KubeSettings

CONFIG_KEY = "run_config.json"
CONFIG_DIR = "/config"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_KEY}"
IPC_DIR = "/aiperf/ipc"
ARTIFACT_DIR = "/aiperf/artifacts"
TCP_BIND_HOST = "0.0.0.0"
CURVE_DIR = "/curve"
"""Where the run's CURVE key Secret is mounted (every container, read-only)."""


def require_secrets(settings: KubeSettings, run_config: RunConfig) -> None:
    """Fail closed: raise `KubeConfigError` when the run needs a secret (headers named in the
    benchmark, or `settings.require_api_key`) that no Secret reference supplies."""
    mapped = settings.endpoint_secret_env()
    header_names = run_config.benchmark.endpoint.header_names
    if header_names and HEADERS_ENV not in mapped:
        raise KubeConfigError(
            f"the run sends headers {', '.join(header_names)} but no Secret supplies {HEADERS_ENV}: "
            f"store their JSON object in a Secret and pass headers_secret SECRET/KEY")
    if settings.require_api_key and API_KEY_ENV not in mapped:
        raise KubeConfigError(
            f"the run uses an API key but no Secret supplies {API_KEY_ENV}: "
            f"store it in a Secret and pass api_key_secret SECRET/KEY")


POD_REGISTRATION_TIMEOUT_S = 180.0
"""Pods start cold (image pulls, pex unpacking, scheduling): every service gets at least
this long to register (measured: 25-40 s for 12 containers on a 2-core podman host)."""


def cluster_run_config(settings: KubeSettings, run_config: RunConfig) -> dict[str, Any]:
    """`run_config` as the pods must see it, as a JSON-ready document (see the module doc).

    The document decodes as `RunConfig`; for an uneven split its `services` carries
    `last_group_workers`; `runtime.registration_timeout_s` is at least
    `POD_REGISTRATION_TIMEOUT_S`."""
    runtime = msgspec.structs.replace(run_config.runtime, registration_timeout_s=max(
        run_config.runtime.registration_timeout_s, POD_REGISTRATION_TIMEOUT_S))
    adapted = msgspec.structs.replace(
        run_config, kubernetes=True, artifact_dir=ARTIFACT_DIR, runtime=runtime, dataset_dir="",
        comms=CommsOptions(ipc_dir=IPC_DIR, tcp_bind_host=TCP_BIND_HOST, ports={},
                           curve_keys_dir=CURVE_DIR))
    document: dict[str, Any] = msgspec.to_builtins(adapted)
    document["services"] = settings.layout.service_counts()
    return document


def run_config_json(settings: KubeSettings, run_config: RunConfig) -> str:
    """The text of `run_config.json` in the ConfigMap (indented JSON, field order kept)."""
    encoded = msgspec.json.encode(cluster_run_config(settings, run_config))
    return msgspec.json.format(encoded, indent=2).decode() + "\n"


def build_config_map(settings: KubeSettings, run_config: RunConfig) -> dict[str, Any]:
    """The ConfigMap holding `run_config.json`; raises `KubeConfigError` when the run needs a
    secret no Secret reference supplies (see `require_secrets`)."""
    require_secrets(settings, run_config)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(settings, config_map_name(settings.name)),
        "data": {CONFIG_KEY: run_config_json(settings, run_config)},
    }
