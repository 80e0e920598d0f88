"""Fixtures: the run configs and settings the manifest tests share (helpers are fixtures: pytest
does not put this folder on sys.path for conftest imports)."""

from __future__ import annotations

from typing import Any

import pytest

from aiperf.config import Benchmark, CommsOptions, ConcurrencyPhase, Endpoint, RunConfig
from aiperf.kube import ContainerResources, KubeSettings


def _run_config(**endpoint: Any) -> RunConfig:
    # Local-looking comms on purpose: the builders must replace them for the cluster.
    return RunConfig(run_id="run-20250101-000000", mode="profile", artifact_dir="artifacts",
                     comms=CommsOptions(ipc_dir="/tmp/aiperf-x/ipc", tcp_bind_host="127.0.0.1",
                                        ports={"control": 0}),
                     benchmark=Benchmark(models=["Qwen/Qwen3-0.6B"],
                                         endpoint=Endpoint(urls=["http://vllm.llm.svc:8000"], **endpoint),
                                         phases=[ConcurrencyPhase(concurrency=64, requests=640)]),
                     t0_wall_ns=1_735_689_600_000_000_000)


@pytest.fixture
def typical() -> tuple[KubeSettings, RunConfig]:
    """20 workers in two full pods, an API key from a Secret, a private registry."""
    settings = KubeSettings(name="llama-c64", namespace="bench", image_registry="registry.example.com",
                            image_tag="0.1.0", total_workers=20, workers_per_pod=10,
                            api_key_secret="llm-api/api-key", require_api_key=True)
    return settings, _run_config()


@pytest.fixture
def uneven() -> tuple[KubeSettings, RunConfig]:
    """25 workers: two pods of 10 and a last pod of 5; headers from a Secret; every user knob."""
    settings = KubeSettings(
        name="demo", namespace="perf", image_registry="", image_tag="latest", total_workers=25,
        workers_per_pod=10, record_processors_per_pod=3, headers_secret="llm-headers/json",
        env_vars={"AIPERF_LOG_FORMAT": "json"}, env_from_secrets={"HF_TOKEN": "hf/token"},
        labels={"team": "perf"}, annotations={"owner": "perf-team"},
        node_selector={"nvidia.com/gpu.present": "false"},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"}],
        image_pull_secrets=["regcred"], service_account="aiperf-runner", ttl_seconds=600,
        resources={"worker": ContainerResources(requests={"cpu": "1", "memory": "1Gi"},
                                                limits={"memory": "1Gi"})})
    return settings, _run_config(header_names=["X-Tenant", "Authorization"])


@pytest.fixture(scope="session")
def run_config_of():
    """`run_config_of(**endpoint)`: the shared run config with these endpoint fields."""
    return _run_config


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio only: the code runs on asyncio (pyzmq asyncio sockets, uvloop); anyio would
    otherwise also run every test on trio, which selenium brings in."""
    return "asyncio"

