"""`ZygoteLauncher`: local services forked from one zygote process (`aiperf.runtime.zygote`)
that imported their modules (and the bundled tokenizer) once, instead of nine interpreters
that each import everything again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from aiperf.config import RunConfig
from aiperf.config.catalog import spec_of
from aiperf.messages import ServiceType
from aiperf.system_controller.launcher import Handle, Planned, default_argv
from aiperf.zygote_process import ZygoteProcess, zygote_env

log = structlog.get_logger("aiperf.system_controller.zygote")

ZYGOTE_EXIT_CODE = -int(signal.SIGKILL)
"""What `wait` returns for a service whose zygote vanished before reporting its exit."""

TOKENIZER_USERS = frozenset({ServiceType.DATASET_MANAGER, ServiceType.RECORD_PROCESSOR})


def preloads(config: RunConfig, planned: list[Planned]) -> list[str]:
    """The service modules the zygote imports: those of `planned`, cheapest-to-start first."""
    modules: list[str] = []
    for p in planned:
        module = spec_of(p.service_type).module
        if module not in modules:
            modules.append(module)
    return modules


def preloaded_tokenizer(config: RunConfig) -> str | None:
    """The tokenizer the zygote loads before forking its users: the bundled one only (a
    Hugging Face tokenizer.json is loaded by each service, after its fork)."""
    from aiperf.tokenizer.names import BUILTIN_NAMES

    name = config.benchmark.tokenizer.name
    if name is None:
        return "builtin"
    return name if name.strip().lower() in BUILTIN_NAMES else None


class _ForkedHandle:
    """A service forked by the zygote: its pid arrives with the `spawned` event, its exit code
    with `exited`; signals go straight to the pid."""

    def __init__(self, planned: Planned) -> None:
        self.planned = planned
        self.pid: int | None = None
        self._code: int | None = None
        self._exited = anyio.Event()
        self._signal_when_spawned: int | None = None

    def spawned(self, pid: int) -> None:
        self.pid = pid
        if self._signal_when_spawned is not None:
            self._send(self._signal_when_spawned)

    def exited(self, code: int) -> None:
        if self._code is None:
            self._code = code
            self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self._code is not None
        return self._code

    def _send(self, sig: int) -> None:
        if self._code is not None:
            return
        if self.pid is None:
            self._signal_when_spawned = sig
            return
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:  # exited; the zygote's report is on its way
            pass

    def terminate(self) -> None:
        self._send(signal.SIGTERM)

    def kill(self) -> None:
        self._send(signal.SIGKILL)

    @property
    def returncode(self) -> int | None:
        return self._code


class ZygoteLauncher:
    """Starts each service by asking the zygote to fork it (see `aiperf.runtime.zygote`).

    Use as an async context manager: entering starts the zygote (it begins importing at once),
    or adopts `zygote`, one the command started early (`ZygoteProcess.start_early`), and
    configures it for this run (preload list, tokenizer, log file, environment); leaving closes
    its stdin (it exits; any service still running gets SIGTERM) and waits for it. Services log
    to `<log_dir>/<service_id>.log`, the zygote to `<log_dir>/zygote.log`; like
    `LocalLauncher`'s, they stop when this process dies, however it dies. `marks` collects the
    zygote's start-up timings (name, wall-clock ns) and each service's spawn time.
    """

    def __init__(self, *, config: RunConfig, config_path: str, log_dir: Path,
                 planned: list[Planned], env: dict[str, str] | None = None,
                 zygote: ZygoteProcess | None = None) -> None:
        self._config, self._config_path, self._log_dir = config, config_path, log_dir
        self._planned = planned
        self._env = zygote_env(env)
        self._tokenizer = preloaded_tokenizer(config)
        self._handles: dict[str, _ForkedHandle] = {}
        self._by_pid: dict[int, _ForkedHandle] = {}
        self._zygote = zygote
        self._stack = AsyncExitStack()
        self._tg: TaskGroup | None = None
        self._eof = anyio.Event()
        self.marks: list[tuple[str, int]] = []

    def log_path(self, service_id: str) -> Path:
        """Where the service's stderr goes."""
        return self._log_dir / f"{service_id}.log"

    async def __aenter__(self) -> ZygoteLauncher:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self._log_dir / "zygote.log"
        preload = preloads(self._config, self._planned)
        zygote = self._zygote
        if zygote is None:
            zygote = self._zygote = ZygoteProcess.start(
                preload=preload, tokenizer=self._tokenizer, env=self._env, log_path=str(log_path),
                config_path=self._config_path)
        else:
            with open(zygote.log_path, "rb") as early, open(log_path, "ab") as log_file:
                shutil.copyfileobj(early, log_file)  # what it said before the run was known
            zygote.send({"configure": {"preload": preload, "tokenizer": self._tokenizer,
                                       "log": str(log_path), "env": self._env}})
        self.marks.append(("zygote.launch", zygote.launched_ns))
        os.set_blocking(zygote.stdout_fd, False)
        try:
            self._tg = await self._stack.enter_async_context(anyio.create_task_group())
            self._tg.start_soon(self._read_events, zygote)
        except BaseException:
            zygote.close()
            raise
        return self

    async def __aexit__(self, et: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        zygote = self._zygote
        assert zygote is not None
        with anyio.CancelScope(shield=True):
            zygote.popen.stdin.close()  # type: ignore[union-attr]  # (set: started with a pipe)
            with anyio.move_on_after(5.0):
                await self._eof.wait()  # its stdout closes when it exits (children close theirs)
            if not self._eof.is_set():
                zygote.popen.kill()
                await self._eof.wait()
            zygote.close()  # waits for it
        await self._stack.aclose()

    async def start(self, planned: Planned) -> Handle:
        """Ask for `planned`; returns at once (the pid is known once the zygote forked it)."""
        zygote = self._zygote
        assert zygote is not None, "use ZygoteLauncher as a context manager"
        handle = _ForkedHandle(planned)
        self._handles[planned.service_id] = handle
        self.log_path(planned.service_id).parent.mkdir(parents=True, exist_ok=True)
        argv = default_argv(planned, self._config_path)
        zygote.send({"id": planned.service_id, "argv": argv[3:], "title": argv,
                     "log": str(self.log_path(planned.service_id)),
                     "tokenizer": self._tokenizer is not None and planned.service_type in TOKENIZER_USERS})
        return handle

    async def _read_events(self, zygote: ZygoteProcess) -> None:
        fd, buffer = zygote.stdout_fd, b""
        try:
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        self._apply(json.loads(line))
        finally:
            self._eof.set()
            for handle in self._handles.values():  # no zygote, no reports: the services died with it
                handle.exited(ZYGOTE_EXIT_CODE)

    def _apply(self, event: dict[str, Any]) -> None:
        match event.get("ev"):
            case "mark":
                self.marks.append((event["name"], event["t"]))
            case "spawned":
                spawned = self._handles[event["id"]]
                self._by_pid[event["pid"]] = spawned
                self.marks.append((f"spawned {event['id']}", event["t"]))
                spawned.spawned(event["pid"])
            case "exited":
                if (handle := self._by_pid.get(event["pid"])) is not None:
                    self.marks.append((f"exited {handle.planned.service_id} (code {event['code']}, "
                                       f"{event.get('cpu_s', 0):.2f} s CPU in all)", event.get("t", time.time_ns())))
                    handle.exited(event["code"])
            case other:
                log.warning("zygote.unknown_event", event=other)
