"""The benchmark model (`Benchmark`, read with `aiperf.config.loader`) and the run
configuration every service process reads (`RunConfig`, `run_config.json`)."""

from aiperf.config.benchmark import (
    Artifacts,
    Benchmark,
    Cancellation,
    ConcurrencyPhase,
    ConstantPhase,
    Dataset,
    DatasetFormat,
    Delay,
    Endpoint,
    EndpointKind,
    ExportLevel,
    FileDataset,
    FixedSchedulePhase,
    GammaPhase,
    GpuTelemetry,
    Length,
    Phase,
    PhaseKind,
    PoissonPhase,
    PrefixPrompts,
    Prompts,
    RatePhase,
    Runtime,
    ServerMetrics,
    SyntheticDataset,
    TokenizerSpec,
    UserCentricPhase,
    benchmark_schema,
)
from aiperf.config.loader import ConfigError, Secrets, decode_benchmark, normalize
from aiperf.config.run_config import (
    MAX_RESPONSE_BYTES_ENV,
    READ_IDLE_TIMEOUT_ENV,
    SECRET_ENV_VARS,
    CommsOptions,
    HttpOptions,
    MetricsOptions,
    RunConfig,
    RunMode,
    RuntimeOptions,
    ServiceCounts,
    dump_run_config,
    group_id,
    group_index,
    load_run_config,
)

__all__ = [
    "SECRET_ENV_VARS", "Artifacts", "Benchmark", "Cancellation", "CommsOptions", "ConcurrencyPhase",
    "ConfigError", "ConstantPhase", "Dataset", "DatasetFormat", "Delay", "Endpoint", "EndpointKind", "ExportLevel",
    "FileDataset", "FixedSchedulePhase", "GammaPhase", "GpuTelemetry", "Length", "HttpOptions", "MAX_RESPONSE_BYTES_ENV", "MetricsOptions", "READ_IDLE_TIMEOUT_ENV", "Phase", "PhaseKind", "PoissonPhase",
    "PrefixPrompts", "Prompts", "RatePhase", "RunConfig", "RunMode", "Runtime", "RuntimeOptions", "ServerMetrics",
    "Secrets", "ServiceCounts", "SyntheticDataset", "TokenizerSpec", "UserCentricPhase", "benchmark_schema", "decode_benchmark",
    "dump_run_config", "group_id", "group_index", "load_run_config", "normalize",
]
