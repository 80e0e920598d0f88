"""Run configuration shared by every service process."""

from aiperf.config.profile import EndpointKind, ProfileOptions, RateMode
from aiperf.config.run_config import (
    SECRET_ENV_VARS,
    CommsOptions,
    ConfigError,
    RunConfig,
    RunMode,
    RuntimeOptions,
    ServiceCounts,
    dump_run_config,
    load_run_config,
)

__all__ = [
    "SECRET_ENV_VARS", "CommsOptions", "EndpointKind", "ProfileOptions", "RateMode", "ConfigError", "RunConfig", "RunMode", "RuntimeOptions",
    "ServiceCounts", "dump_run_config", "load_run_config",
]
