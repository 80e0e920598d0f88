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
    group_id,
    group_index,
    load_run_config,
)

__all__ = [
    "SECRET_ENV_VARS", "CommsOptions", "ConfigError", "EndpointKind", "ProfileOptions", "RateMode",
    "RunConfig", "RunMode", "RuntimeOptions", "ServiceCounts", "dump_run_config", "group_id",
    "group_index", "load_run_config",
]
