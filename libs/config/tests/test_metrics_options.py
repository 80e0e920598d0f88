"""`MetricsOptions` (AIPerf's OSL-mismatch thresholds) and `HttpOptions` (response bounds) from the
environment."""

from __future__ import annotations

import msgspec
import pytest

from aiperf.config import (
    MAX_RESPONSE_BYTES_ENV,
    READ_IDLE_TIMEOUT_ENV,
    CommsOptions,
    ConfigError,
    HttpOptions,
    MetricsOptions,
    RunConfig,
)
from aiperf.config.run_config import OSL_MISMATCH_PCT_ENV, OSL_MISMATCH_TOKENS_ENV


def test_defaults_are_aiperfs() -> None:
    assert MetricsOptions.from_env({}) == MetricsOptions(osl_mismatch_pct_threshold=5.0,
                                                         osl_mismatch_max_token_threshold=50)
    assert MetricsOptions.from_env({OSL_MISMATCH_PCT_ENV: "", OSL_MISMATCH_TOKENS_ENV: ""}) == MetricsOptions()


def test_environment_sets_both_thresholds() -> None:
    options = MetricsOptions.from_env({OSL_MISMATCH_PCT_ENV: "12.5", OSL_MISMATCH_TOKENS_ENV: "8"})
    assert options == MetricsOptions(osl_mismatch_pct_threshold=12.5, osl_mismatch_max_token_threshold=8)


@pytest.mark.parametrize(("name", "value", "message"), [
    (OSL_MISMATCH_PCT_ENV, "five", "is not a number"),
    (OSL_MISMATCH_PCT_ENV, "101", "must be in 0..100"),
    (OSL_MISMATCH_TOKENS_ENV, "2.5", "is not an integer"),
    (OSL_MISMATCH_TOKENS_ENV, "0", "must be >= 1"),
])
def test_a_bad_value_names_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        MetricsOptions.from_env({name: value})
    assert name in str(info.value)


def test_run_config_round_trips_the_options_and_the_dataset_folder() -> None:
    comms = CommsOptions(ipc_dir="/tmp")
    config = RunConfig(run_id="r", artifact_dir="/a", comms=comms, dataset_dir="/tmp/d",
                       metrics=MetricsOptions(osl_mismatch_pct_threshold=1.0))
    assert msgspec.json.decode(msgspec.json.encode(config), type=RunConfig) == config
    assert config.dataset_path == "/tmp/d"
    assert RunConfig(run_id="r", artifact_dir="/a", comms=comms).dataset_path == "/a/dataset"


def test_http_bounds_from_the_environment() -> None:
    assert HttpOptions.from_env({}) == HttpOptions(read_idle_timeout_s=300.0, max_response_bytes=256 << 20)
    options = HttpOptions.from_env({READ_IDLE_TIMEOUT_ENV: "1.5", MAX_RESPONSE_BYTES_ENV: "4096"})
    assert options == HttpOptions(read_idle_timeout_s=1.5, max_response_bytes=4096)


@pytest.mark.parametrize(("name", "value", "message"), [
    (READ_IDLE_TIMEOUT_ENV, "soon", "is not a number"),
    (READ_IDLE_TIMEOUT_ENV, "inf", "is not a finite number"),
    (READ_IDLE_TIMEOUT_ENV, "0", "must be > 0"),
    (MAX_RESPONSE_BYTES_ENV, "1e6", "is not an integer"),
    (MAX_RESPONSE_BYTES_ENV, "10", "must be >= 1024"),
])
def test_a_bad_http_bound_names_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        HttpOptions.from_env({name: value})
    assert name in str(info.value)
