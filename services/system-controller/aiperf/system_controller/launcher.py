"""How the system-controller starts services: local processes, or nothing (Kubernetes, where
the containers are started by the cluster and only register)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
from anyio.abc import Process

from aiperf.config.catalog import spec_of
from aiperf.messages import ServiceType


@dataclass(frozen=True, kw_only=True)
class Planned:
    """One service instance the run needs."""

    service_type: ServiceType
    service_id: str
    group_id: str = ""


class Handle(Protocol):
    """A started service instance the controller can watch and stop."""

    planned: Planned
    pid: int | None

    async def wait(self) -> int: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    @property
    def returncode(self) -> int | None: ...


class Launcher(Protocol):
    """Starts service instances; `start` returns once the process exists."""

    async def start(self, planned: Planned) -> Handle | None: ...


def default_argv(planned: Planned, config_path: str) -> list[str]:
    """`python -m aiperf.boot aiperf.<svc>.main --config ... --service-id ...` for this
    interpreter (`aiperf.boot` trims start-up imports, then runs the service's main)."""
    argv = [sys.executable, "-m", "aiperf.boot", spec_of(planned.service_type).module, "--config",
            config_path, "--service-id", planned.service_id]
    if planned.group_id:
        argv += ["--group-id", planned.group_id]
    return argv


class _ProcessHandle:
    def __init__(self, planned: Planned, process: Process) -> None:
        self.planned, self._process = planned, process
        self.pid: int | None = process.pid

    async def wait(self) -> int:
        return await self._process.wait()

    def terminate(self) -> None:
        if self._process.returncode is None:
            self._process.terminate()

    def kill(self) -> None:
        if self._process.returncode is None:
            self._process.kill()

    @property
    def returncode(self) -> int | None:
        return self._process.returncode


class LocalLauncher:
    """Starts each service as a child process of this interpreter.

    Children inherit this process's `sys.path` (so a pex or a test sandbox works alike), log to
    `<log_dir>/<service_id>.log`, and stop (SIGTERM, see `aiperf.boot`) when this process dies,
    however it dies. `argv_of` may be replaced (tests start a crashing
    command for one service this way).
    """

    def __init__(self, *, config_path: str, log_dir: Path,
                 argv_of: Callable[[Planned, str], Sequence[str]] = default_argv,
                 env: dict[str, str] | None = None) -> None:
        self._config_path, self._log_dir, self._argv_of = config_path, log_dir, argv_of
        self._env = dict(os.environ if env is None else env)
        self._env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._env.setdefault("PYTHONUNBUFFERED", "1")
        self._env["AIPERF_PARENT_PID"] = str(os.getpid())  # services die with this process

    def log_path(self, service_id: str) -> Path:
        """Where the service's stderr goes."""
        return self._log_dir / f"{service_id}.log"

    async def start(self, planned: Planned) -> Handle:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path(planned.service_id), "ab") as log:
            process = await anyio.open_process(
                list(self._argv_of(planned, self._config_path)), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, env=self._env, start_new_session=True)
        return _ProcessHandle(planned, process)


class NoLauncher:
    """Kubernetes: containers are started by the cluster; nothing to launch or watch here."""

    async def start(self, planned: Planned) -> Handle | None:
        return None
