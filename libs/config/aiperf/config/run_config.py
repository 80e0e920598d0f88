"""`run_config.json`: everything a service process needs to know about its run.

Written once by whoever starts the run (the CLI locally, the ConfigMap in Kubernetes) and
read by every service's `main.py`. Secrets never go in it: they travel as environment
variables (see `SECRET_ENV_VARS`).
"""

from __future__ import annotations

import os
from typing import Literal

import msgspec

from aiperf.config.profile import ProfileOptions
from aiperf.messages import ServiceType

RunMode = Literal["bringup", "profile"]

SECRET_ENV_VARS = ("AIPERF_API_KEY", "AIPERF_HEADERS_JSON")
"""Environment variables that carry secrets (API key, sensitive headers) into services."""


class CommsOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Where sockets live. `tcp_bind_host` None means IPC only; a port of 0 is ephemeral."""

    ipc_dir: str
    tcp_bind_host: str | None = "127.0.0.1"
    ports: dict[str, int] = {}


class ServiceCounts(msgspec.Struct, frozen=True, kw_only=True):
    """How many instances of the scaled services run (per group: `workers_per_group`)."""

    worker_groups: int = 1
    workers_per_group: int = 1
    record_processors_per_group: int = 1

    def expected(self) -> dict[ServiceType, int]:
        """Instances per service type that must register before the run starts."""
        counts: dict[ServiceType, int] = {
            t: 1 for t in ServiceType if t is not ServiceType.SYSTEM_CONTROLLER}
        counts[ServiceType.WORKER_GROUP_MANAGER] = self.worker_groups
        counts[ServiceType.WORKER] = self.worker_groups * self.workers_per_group
        counts[ServiceType.RECORD_PROCESSOR] = self.worker_groups * self.record_processors_per_group
        return counts


class RuntimeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Supervision timing of the system-controller."""

    heartbeat_interval_s: float = 1.0
    heartbeat_timeout_s: float = 10.0
    registration_timeout_s: float = 30.0
    command_timeout_s: float = 30.0
    shutdown_timeout_s: float = 10.0
    log_level: str = "info"


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The whole configuration of one run.

    `profile` holds the benchmark (the `aiperf profile` flags); `mode="bringup"` (no
    profile) starts and stops the services only. `t0_wall_ns` is when the command started,
    for the start-up figure (command start to first request).
    """

    run_id: str
    mode: RunMode = "bringup"
    artifact_dir: str = "artifacts"
    comms: CommsOptions
    services: ServiceCounts = ServiceCounts()
    runtime: RuntimeOptions = RuntimeOptions()
    profile: ProfileOptions | None = None
    t0_wall_ns: int = 0
    kubernetes: bool = False


class ConfigError(Exception):
    """`run_config.json` is missing or invalid; the message is one line for the user."""


def load_run_config(path: str | os.PathLike[str]) -> RunConfig:
    """Read and validate `run_config.json`; raises `ConfigError` with a one-line reason."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read run config {os.fspath(path)}: {exc.strerror}") from exc
    try:
        return msgspec.json.decode(data, type=RunConfig)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"invalid run config {os.fspath(path)}: {exc}") from exc


def dump_run_config(config: RunConfig, path: str | os.PathLike[str]) -> None:
    """Write `config` as indented JSON (atomic: temp file then rename)."""
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(msgspec.json.format(msgspec.json.encode(config), indent=2))
    os.replace(tmp, path)
