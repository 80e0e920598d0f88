"""What `aiperf dev-fakes` writes before starting the fakes: `run_config.json`, a small dataset,
and the command that starts the real service against them."""

from __future__ import annotations

import shlex
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from aiperf.config import (
    Benchmark,
    CommsOptions,
    ConcurrencyPhase,
    Endpoint,
    Length,
    Prompts,
    RunConfig,
    RuntimeOptions,
    ServiceCounts,
    SyntheticDataset,
    dump_run_config,
)
from aiperf.messages import ServiceType

CONVERSATIONS = 5
"""Conversations of the written dataset (and of the one the dataset-manager is asked to build)."""

GROUP = "g0"
SERVICE_IDS = {ServiceType.WORKER: f"worker-{GROUP}-0",
               ServiceType.RECORD_PROCESSOR: f"record-processor-{GROUP}-0",
               ServiceType.WORKER_GROUP_MANAGER: f"worker-group-manager-{GROUP}"}
"""Ids of the grouped services run by hand (the controller's plan names them so); others: the type."""

API_PORT_ENV = "AIPERF_API_PORT"
_IPC_PATH_MAX = 80
"""Longest IPC folder used as is: socket paths must stay under AF_UNIX's 108 bytes."""


@dataclass(frozen=True, kw_only=True)
class Fixture:
    """Everything written for one `dev-fakes` session, and how to start the service by hand."""

    service_type: ServiceType
    directory: Path
    config: RunConfig
    config_path: Path
    dataset_dir: Path
    conversation_ids: list[str]
    requests: int
    env: dict[str, str] = field(default_factory=dict)
    temporary_ipc: bool = False

    @property
    def service_id(self) -> str:
        """The id the service must register with (`--service-id`)."""
        return SERVICE_IDS.get(self.service_type, str(self.service_type))

    @property
    def group_id(self) -> str:
        """Its worker group (`--group-id`), empty for controller-side services."""
        return GROUP if self.service_type in SERVICE_IDS else ""

    @property
    def flags(self) -> list[str]:
        """The service's command-line flags."""
        if self.service_type is ServiceType.SYSTEM_CONTROLLER:
            return ["--config", str(self.config_path), "--external-services"]
        flags = ["--config", str(self.config_path), "--service-id", self.service_id]
        return flags + (["--group-id", self.group_id] if self.group_id else [])

    def commands(self) -> tuple[str, str]:
        """(the `./pants run` command, the `aiperf service` command) that start the service."""
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in self.env.items())
        flags = shlex.join(self.flags)
        return (f"{env}./pants run services/{self.service_type}:main -- {flags}",
                f"{env}aiperf service {self.service_type} {flags}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_dataset(dataset_dir: Path, ids: list[str]) -> None:
    """One single-turn conversation per id, written without a tokenizer (fast to start)."""
    from aiperf.dataset import Conversation, Turn, write_dataset

    conversations = []
    for i, cid in enumerate(ids):
        text = f"dev-fakes prompt {i}: describe the number {i} in a few words"
        conversations.append(Conversation(id=cid, turns=[Turn(text=text, input_tokens=len(text.split()),
                                                             max_tokens=16)]))
    write_dataset(dataset_dir, conversations)


def write_fixture(service_type: ServiceType, directory: Path, *, url: str, model: str, requests: int,
                  workers: int) -> Fixture:
    """Write `run_config.json` (IPC only, one worker group; `workers` workers for a
    timing-manager, else one; a profiling phase of `requests` requests) and a
    `CONVERSATIONS`-conversation dataset under `directory/artifacts/dataset`."""
    directory.mkdir(parents=True, exist_ok=True)
    ipc_dir, temporary = directory / "ipc", False
    if len(str(ipc_dir)) > _IPC_PATH_MAX:
        ipc_dir, temporary = Path(tempfile.mkdtemp(prefix="aiperf-dev-", dir="/tmp")), True
    ipc_dir.mkdir(parents=True, exist_ok=True)
    artifacts = directory / "artifacts"
    dataset_dir = artifacts / "dataset"
    ids = [f"session_{i:06d}" for i in range(CONVERSATIONS)]
    _write_dataset(dataset_dir, ids)
    group_workers = workers if service_type is ServiceType.TIMING_MANAGER else 1
    dataset = SyntheticDataset(entries=CONVERSATIONS, prompts=Prompts(isl=Length(mean=32), osl=Length(mean=16)))
    config = RunConfig(
        run_id="dev", mode="profile", artifact_dir=str(artifacts),
        comms=CommsOptions(ipc_dir=str(ipc_dir), tcp_bind_host=None),
        services=ServiceCounts(workers_per_group=group_workers),
        runtime=RuntimeOptions(heartbeat_interval_s=1.0, log_level="info"),
        benchmark=Benchmark(models=[model], endpoint=Endpoint(urls=[url], streaming=True), datasets=[dataset],
                            phases=[ConcurrencyPhase(requests=requests,
                                                     concurrency=max(1, min(group_workers, requests)))]))
    config_path = directory / "run_config.json"
    dump_run_config(config, config_path)
    env = {API_PORT_ENV: str(_free_port())} if service_type is ServiceType.API else {}
    return Fixture(service_type=service_type, directory=directory, config=config, config_path=config_path,
                   dataset_dir=dataset_dir, conversation_ids=ids, requests=requests, env=env,
                   temporary_ipc=temporary)
