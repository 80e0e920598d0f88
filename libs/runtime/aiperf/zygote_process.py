"""`ZygoteProcess`: a started zygote (`aiperf.runtime.zygote`) and the pipes of its protocol.

Light on purpose (standard library only, like `aiperf.boot`): `aiperf profile` starts the
zygote before it imports its own heavy modules, so the zygote's imports run on the second core
while the command parses its flags (`start_early`). The system-controller's `ZygoteLauncher`
then adopts it and sends one `configure` request (the run's preload list, tokenizer, log file
and environment) before the first spawn request. An early zygote that is never adopted (a bad
flag, a sweep, an unreachable server) is killed and waited for by `close`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time

TITLE_ROOM = 768
"""Bytes of command line a forked child may use for its title (see `aiperf.runtime.zygote`)."""

FORKED_AHEAD = frozenset({"aiperf.api.main"})
"""Service modules the zygote never imports itself: when one is in its preload list, it forks a
child ahead of the request, which imports the module and waits for its request (see
`aiperf.runtime.zygote`). The api is one process per run (a preload would share nothing) and
its web framework is the costliest import of all (litestar, ~0.9 s of CPU on a quiet host);
forked ahead, that import runs on another core while the zygote imports the other services
and loads the tokenizer, instead of adding to the zygote's serial path to the first request."""

TOKENIZER_MODULES = frozenset({"aiperf.dataset_manager.main", "aiperf.record_processor.main"})
"""Service modules whose services use the preloaded tokenizer: a zygote with a tokenizer forks a
second one that loads it and imports these on another core, while the first imports the rest
(see `aiperf.runtime.zygote`); the launcher marks their spawn requests `tokenizer`."""

LOCAL_PROFILE_MODULES = (
    "aiperf.event_bus_proxy.main", "aiperf.records_manager.main", "aiperf.timing_manager.main",
    "aiperf.api.main", "aiperf.worker_group_manager.main", "aiperf.worker.main",
    "aiperf.dataset_manager.main", "aiperf.record_processor.main",
)
"""What an early zygote imports (or forks ahead) before the run's config is known: the modules
of every service of a local `aiperf profile`, in start order (the launcher's `configure` adds
any other)."""

EARLY_TOKENIZER = "builtin"
"""The tokenizer an early zygote loads once its imports are done, while the command is still
parsing its flags: the bundled one, what a run without `--tokenizer` uses (~0.9 s of CPU that
is then off the path to the first request). A run that names another tokenizer configures it
instead (this load is then wasted idle time); one that needs none leaves it unused."""

ZYGOTE_ENV = "AIPERF_ZYGOTE"
"""`0` starts each local service as its own interpreter instead of forking it from the zygote."""


def zygote_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a zygote started from this process: `base` (default `os.environ`)
    with this interpreter's `sys.path` as PYTHONPATH and this process as the parent the zygote
    dies with (`AIPERF_PARENT_PID`)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["AIPERF_PARENT_PID"] = str(os.getpid())
    return env


class ZygoteProcess:
    """One zygote process: `stdin_fd` takes requests, `stdout_fd` gives events, its stderr
    goes to `log_path`. `launched_ns`: when it was started (wall clock)."""

    def __init__(self, popen: subprocess.Popen[bytes], *, log_path: str, launched_ns: int,
                 early: bool) -> None:
        self.popen, self.log_path, self.launched_ns, self.early = popen, log_path, launched_ns, early
        assert popen.stdin is not None and popen.stdout is not None
        self.stdin_fd, self.stdout_fd = popen.stdin.fileno(), popen.stdout.fileno()

    @classmethod
    def start(cls, *, preload: list[str] | tuple[str, ...], tokenizer: str | None, env: dict[str, str],
              log_path: str, config_path: str = "", early: bool = False) -> ZygoteProcess:
        """Start `python -m aiperf.boot --zygote ...` in its own session, stderr appended to
        `log_path`."""
        argv = [sys.executable, "-m", "aiperf.boot", "--zygote"]
        if config_path:
            argv += ["--config", config_path]
        argv += ["--preload", ",".join(preload)]
        if tokenizer is not None:
            argv += ["--tokenizer", tokenizer]
        argv += ["--title-room", "_" * TITLE_ROOM]
        launched = time.time_ns()
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                     env=env, start_new_session=True)
        return cls(popen, log_path=log_path, launched_ns=launched, early=early)

    @classmethod
    def start_early(cls) -> ZygoteProcess | None:
        """A zygote preloading `LOCAL_PROFILE_MODULES` and the tokenizer of a run without
        `--tokenizer` (`EARLY_TOKENIZER`), logging to a temporary file until it is configured;
        None with `AIPERF_ZYGOTE=0`."""
        if os.environ.get(ZYGOTE_ENV, "1") == "0":
            return None
        fd, log_path = tempfile.mkstemp(prefix="aiperf-zygote-", suffix=".log")
        os.close(fd)
        try:
            return cls.start(preload=LOCAL_PROFILE_MODULES, tokenizer=EARLY_TOKENIZER, env=zygote_env(),
                             log_path=log_path, early=True)
        except BaseException:
            os.unlink(log_path)
            raise

    def send(self, request: dict[str, object]) -> None:
        """Write one request line (small: the pipe takes it without blocking)."""
        import json

        data = (json.dumps(request) + "\n").encode()
        while data:
            data = data[os.write(self.stdin_fd, data):]

    def close(self) -> None:
        """Kill the zygote if it still runs and wait for it; remove an early zygote's temporary
        log. Idempotent; for a zygote nobody adopted (an adopted one has exited by then)."""
        if self.popen.returncode is None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, 9)  # its own session: no service was forked yet, or
            self.popen.wait()  # they die with it anyway (SIGTERM from the kernel)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self.early:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.log_path)
