"""`run_config.json`: everything a service process needs to know about its run.

Written once by whoever starts the run (the CLI locally, the ConfigMap in Kubernetes) and
read by every service's `main.py`. Secrets never go in it: they travel as environment
variables (see `SECRET_ENV_VARS`).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

import msgspec

from aiperf.config.benchmark import Benchmark
from aiperf.config.catalog import CATALOG, Scale
from aiperf.config.loader import ConfigError
from aiperf.messages import ServiceType

RunMode = Literal["bringup", "profile"]

BRINGUP_MODEL = "bringup"
"""Model name of the placeholder benchmark of runs that never configure their services."""

SECRET_ENV_VARS = ("AIPERF_API_KEY", "AIPERF_HEADERS_JSON")
"""Environment variables that carry secrets (API key, sensitive headers) into services."""


class CommsOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Where sockets live. `tcp_bind_host` None means IPC only; a port of 0 is ephemeral.
    `curve_keys_dir` names a directory holding the run's CURVE key files (`server.key`,
    `client.key`); None leaves the channels unauthenticated (the local default). The keys
    themselves never travel in the run config."""

    ipc_dir: str
    tcp_bind_host: str | None = "127.0.0.1"
    ports: dict[str, int] = {}
    curve_keys_dir: str | None = None


class ServiceCounts(msgspec.Struct, frozen=True, kw_only=True):
    """How many instances of the scaled services run.

    Groups are `g0..g<worker_groups-1>` (one worker pod each in Kubernetes). Every group runs
    one worker-group-manager, `record_processors_per_group` record-processors and
    `workers_per_group` workers, except the last group, which runs `last_group_workers`
    workers when that is set (an uneven split: 1..workers_per_group-1, and only with at least
    two groups). An invalid combination fails to construct or decode (`ValueError`, or
    `msgspec.ValidationError` from a decoder)."""

    worker_groups: int = 1
    workers_per_group: int = 1
    record_processors_per_group: int = 1
    last_group_workers: int | None = None

    def __post_init__(self) -> None:
        if self.worker_groups < 1 or self.workers_per_group < 1 or self.record_processors_per_group < 1:
            raise ValueError("services: worker_groups, workers_per_group and record_processors_per_group "
                             "must be at least 1")
        last = self.last_group_workers
        if last is not None:
            if self.worker_groups < 2:
                raise ValueError("services.last_group_workers needs worker_groups >= 2")
            if not 1 <= last <= self.workers_per_group - 1:
                raise ValueError(f"services.last_group_workers={last} must be in "
                                 f"1..{self.workers_per_group - 1} (fewer than workers_per_group)")

    def workers_in(self, group: int) -> int:
        """Workers of group `g<group>`; raises `ValueError` for a group outside the run."""
        if not 0 <= group < self.worker_groups:
            raise ValueError(f"group {group} is not in 0..{self.worker_groups - 1}")
        if self.last_group_workers is not None and group == self.worker_groups - 1:
            return self.last_group_workers
        return self.workers_per_group

    @property
    def total_workers(self) -> int:
        """Workers across all groups."""
        return sum(self.workers_in(g) for g in range(self.worker_groups))

    def instances_in(self, group: int, scale: Scale) -> int:
        """Instances of a service of `scale` in group `g<group>` (a `Scale.ONE` service is in no
        group: 0)."""
        return {Scale.ONE: 0, Scale.PER_GROUP: 1, Scale.WORKERS: self.workers_in(group),
                Scale.RECORD_PROCESSORS: self.record_processors_per_group}[scale]

    def expected(self) -> dict[ServiceType, int]:
        """Instances per service type that must register before the run starts (every type of
        the catalog but the system-controller itself)."""
        return {spec.type: 1 if spec.scale is Scale.ONE else
                sum(self.instances_in(g, spec.scale) for g in range(self.worker_groups))
                for spec in CATALOG if spec.type is not ServiceType.SYSTEM_CONTROLLER}


def group_id(index: int) -> str:
    """The id of group number `index` (`g3`): the `--group-id` of its services."""
    return f"g{index}"


def group_index(group: str) -> int:
    """The number of group id `group` (`"g3"` -> 3); raises `ValueError` for anything else."""
    digits = group[1:] if group.startswith("g") else ""
    if not digits.isdigit() or not digits.isascii():
        raise ValueError(f"{group!r} is not a worker group id (g<number>)")
    return int(digits)


class RuntimeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Supervision timing of the system-controller (and, `cancel_drain_s`, how long the
    timing-manager waits for cancelled requests before declaring them lost).

    `max_lost_worker_fraction` (Kubernetes mode only): the share of the run's workers that may
    be lost (a worker pod whose services all stopped heartbeating loses all its workers) while
    the run goes on, degraded. Losing more than that share, or every worker, fails the run
    naming the lost pods. 0 fails on the first lost worker; 1 tolerates any loss short of all
    workers. Locally a lost worker always degrades the run, as before."""

    heartbeat_interval_s: float = 1.0
    heartbeat_timeout_s: float = 10.0
    registration_timeout_s: float = 30.0
    command_timeout_s: float = 30.0
    shutdown_timeout_s: float = 10.0
    cancel_drain_s: float = 10.0
    log_level: str = "info"
    max_lost_worker_fraction: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_lost_worker_fraction <= 1.0:
            raise ValueError(f"runtime.max_lost_worker_fraction={self.max_lost_worker_fraction:g} "
                             "must be in 0..1")


OSL_MISMATCH_PCT_ENV = "AIPERF_METRICS_OSL_MISMATCH_PCT_THRESHOLD"
OSL_MISMATCH_TOKENS_ENV = "AIPERF_METRICS_OSL_MISMATCH_MAX_TOKEN_THRESHOLD"


class MetricsOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Settings of the metrics that AIPerf 0.13 takes from its environment.

    A request's output length is an OSL mismatch (`osl_mismatch_count`) when it differs from the
    requested one by more than ``min(requested * osl_mismatch_pct_threshold / 100,
    osl_mismatch_max_token_threshold)`` tokens (AIPerf's
    `AIPERF_METRICS_OSL_MISMATCH_PCT_THRESHOLD`, default 5, and
    `AIPERF_METRICS_OSL_MISMATCH_MAX_TOKEN_THRESHOLD`, default 50)."""

    osl_mismatch_pct_threshold: float = 5.0
    osl_mismatch_max_token_threshold: int = 50

    def __post_init__(self) -> None:
        if not 0.0 <= self.osl_mismatch_pct_threshold <= 100.0:
            raise ValueError(f"{OSL_MISMATCH_PCT_ENV}={self.osl_mismatch_pct_threshold:g} must be in 0..100")
        if self.osl_mismatch_max_token_threshold < 1:
            raise ValueError(f"{OSL_MISMATCH_TOKENS_ENV}={self.osl_mismatch_max_token_threshold} must be >= 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MetricsOptions:
        """The options AIPerf's environment variables set in `env` (defaults where unset).
        Raises `ConfigError` naming the variable for a value that is not a number in range."""
        return _options_from_env(cls, env, {"osl_mismatch_pct_threshold": OSL_MISMATCH_PCT_ENV,
                                             "osl_mismatch_max_token_threshold": OSL_MISMATCH_TOKENS_ENV})


READ_IDLE_TIMEOUT_ENV = "AIPERF_HTTP_READ_IDLE_TIMEOUT"
MAX_RESPONSE_BYTES_ENV = "AIPERF_HTTP_MAX_RESPONSE_BYTES"


class HttpOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on one response, so that a faulty server cannot hold a worker or its memory:
    `read_idle_timeout_s` without a byte (waiting for the headers included) fails the request as
    `ReadIdleTimeout`; a body beyond `max_response_bytes` fails it as `ResponseTooLarge` and
    drops the connection. Set from `AIPERF_HTTP_READ_IDLE_TIMEOUT` (seconds, default 300) and
    `AIPERF_HTTP_MAX_RESPONSE_BYTES` (default 256 MiB). A request also ends at the endpoint's
    timeout (`--request-timeout-seconds`), whichever comes first."""

    read_idle_timeout_s: float = 300.0
    max_response_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        if not self.read_idle_timeout_s > 0:
            raise ValueError(f"{READ_IDLE_TIMEOUT_ENV}={self.read_idle_timeout_s:g} must be > 0")
        if self.max_response_bytes < 1024:
            raise ValueError(f"{MAX_RESPONSE_BYTES_ENV}={self.max_response_bytes} must be >= 1024")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpOptions:
        """The options set in `env` (defaults where unset). Raises `ConfigError` naming the
        variable for a value that is not a number in range."""
        return _options_from_env(cls, env, {"read_idle_timeout_s": READ_IDLE_TIMEOUT_ENV,
                                             "max_response_bytes": MAX_RESPONSE_BYTES_ENV})


_Options = TypeVar("_Options", "MetricsOptions", "HttpOptions")


def _options_from_env(cls: type[_Options], env: Mapping[str, str], variables: Mapping[str, str]) -> _Options:
    """`cls` with each field of `variables` (field -> environment variable) read from `env` as
    the type of its default (the default where unset); `ConfigError` naming the variable for a
    value that is not a number or that `cls` refuses."""
    default = cls()
    values = {field: _env_number(env, name, type(getattr(default, field)), getattr(default, field))
              for field, name in variables.items()}
    try:
        return cls(**values)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _env_number(env: Mapping[str, str], name: str, kind: type[float] | type[int], default: float) -> Any:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} is not a finite number")
    return value


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The whole configuration of one run.

    `benchmark` is what to measure; `mode="bringup"` starts and stops the services only (they
    are never configured: the default benchmark, model `BRINGUP_MODEL`, is never used). `artifact_dir` is where this run's
    processes write (absolute locally, the artifacts volume in a pod), which may differ from the
    user's `benchmark.artifacts.dir`. `t0_wall_ns` is when the command started, for the
    start-up figure (command start to first request). `dataset_dir` is the working folder of
    the dataset files ("" means `<artifact_dir>/dataset`, where Kubernetes pods serve them
    from); a local run points it outside the artifacts unless asked to keep them. `metrics`
    holds the metric settings AIPerf reads from its environment, `http` the response bounds.
    """

    run_id: str
    mode: RunMode = "bringup"
    artifact_dir: str = "artifacts"
    comms: CommsOptions
    services: ServiceCounts = ServiceCounts()
    runtime: RuntimeOptions = RuntimeOptions()
    benchmark: Benchmark = msgspec.field(default_factory=functools.partial(Benchmark, models=[BRINGUP_MODEL]))
    t0_wall_ns: int = 0
    kubernetes: bool = False
    dataset_dir: str = ""
    metrics: MetricsOptions = MetricsOptions()
    http: HttpOptions = HttpOptions()

    @property
    def dataset_path(self) -> str:
        """Where the dataset-manager writes the dataset files and the api serves them from."""
        return self.dataset_dir or os.path.join(self.artifact_dir, "dataset")


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
