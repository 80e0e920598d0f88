"""The zygote: a process that imports the service modules once and forks every local service.

Started as `python -m aiperf.boot --zygote --preload M1,M2 [--tokenizer SPEC] ...` by the
system-controller's `ZygoteLauncher`. Spawning nine fresh interpreters made each pay the shared
runtime's imports again (structlog, anyio, zmq, msgspec, numpy, aiohttp, litestar: 0.5-1.4 s of
CPU each) and the record-processors and dataset-manager load the same tokenizer (~1 s of CPU)
again; a fork starts with all of that already in memory, shared copy-on-write.

Fork safety: nothing here creates an event loop, a ZMQ context or a thread (the tokenizer is
the bundled tiktoken one, which has no threads); every child creates its own after the fork.
rich is hidden from the zygote (by `aiperf.boot`, as from a single service: structlog would
import ~0.35 s of it that no service uses, since they log JSON lines); a child
that renders with it (`aiperf.boot.NEEDS_RICH`) gets it back and imports it after its fork, on
another core.

Idle (no request pending), the zygote works ahead, one step per turn: it imports the event
loop's backend (`RUNTIME_MODULES`), forks a child for each preloaded module of
`aiperf.zygote_process.FORKED_AHEAD` (or `--fork-ahead`), forks its tokenizer zygote (below),
imports the other modules, so that all is done by the time the run asks for its services.

The tokenizer zygote: loading the tokenizer was the longest single step before the first request
(the bundled one now ~0.1 s of CPU from its cached ranks, tiktoken's own encoding being built
only by a process that needs it: `aiperf.tokenizer.bundled`; a tokenizer.json longer), and only the services of
`aiperf.zygote_process.TOKENIZER_MODULES` (or `--tokenizer-modules`: the dataset-manager and the
record-processors) need it. So a zygote with a tokenizer forks a second zygote right after the
event loop's imports, which loads the tokenizer and imports those modules on another core while
the first imports the rest; the first then never imports them nor loads the tokenizer, and
hands it every spawn request marked `tokenizer` (and the run's `configure`, without its preload
list). It shares the first one's event pipe (each event is one `write` of less than PIPE_BUF
bytes: lines never interleave), reports its own children's spawns and exits there, stays in the
first one's process group and dies with it; its marks are named `tokenizer-zygote.*`. A child forked
ahead imports its module on another core, then blocks on a pipe until the zygote hands it its
spawn request (with the zygote's environment, which `configure` may have changed since) and
goes on as any forked service; the zygote reports it as spawned then. Never asked for, it exits
when the pipe closes (the zygote's stdin EOF) or with the zygote.

Protocol, one JSON object per line. Requests on stdin:
`{"id": SID, "argv": [MODULE, ARG...], "log": PATH, "tokenizer": BOOL}` (spawn; `tokenizer`: the
service uses the preloaded tokenizer, so it is forked only after the load, by the tokenizer
zygote when there is one);
`{"configure": {"preload": [M...], "tokenizer": SPEC|null, "log": PATH, "env": {K: V}}}` (a
zygote started before its run was known, `aiperf.zygote_process.ZygoteProcess.start_early`:
more modules to import, the tokenizer to load, where its stderr goes from now on, and the
environment every later fork inherits; each key optional). Events on stdout:
`{"ev": "mark", "name": N, "t": WALL_NS}` (start-up timings), `{"ev": "spawned", "id": SID,
"pid": PID, "t": WALL_NS}`, `{"ev": "exited", "pid": PID, "code": CODE, "cpu_s": S, "t": WALL_NS}` (`code` as
`subprocess` reports it: negative = killed by that signal; `cpu_s`: its user+system CPU time). The zygote exits when stdin closes
or when its parent dies (its children then get SIGTERM: a graceful stop).

A child looks like the process `python -m aiperf.boot MODULE ARGS` it replaces: it runs in its
own session, with stdin on /dev/null and stdout/stderr appended to its log, and its command
line (`/proc/PID/cmdline`, what `ps` and `pgrep -f` show) rewritten to that argv, which is
why the zygote's own command line carries a `--title-room` placeholder: the kernel's argv
area cannot grow.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any, NoReturn

from aiperf.boot import NEEDS_RICH, die_with_parent
from aiperf.zygote_process import FORKED_AHEAD, TITLE_ROOM, TOKENIZER_MODULES

__all__ = ["BLAS_THREADS_ENV", "TITLE_ROOM", "Zygote", "import_numpy_single_threaded", "main", "set_cmdline"]


def set_cmdline(argv: list[str]) -> bool:
    """Rewrite this process's `/proc/self/cmdline` to `argv` (Linux), truncated to the space
    the original command line had; False when that cannot be done here."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (stat fields 48, 49)
    except (OSError, ValueError, IndexError):
        return False
    size = end - start
    if size <= 1:
        return False
    data = b"\0".join(a.encode(errors="replace") for a in argv)[: size - 1]
    ctypes.memmove(start, data.ljust(size, b"\0"), size)
    return True


RUNTIME_MODULES = ("uvloop", "anyio._backends._asyncio", "anyio.to_thread", "numpy", "numpy.ma")
"""Imported before the first fork, whatever the preload list: every service imports the first
three only when its `anyio.run` starts (the event loop's backend), so each child would pay them
again (~0.1 s of CPU each on a quiet machine, several times that on a loaded one). numpy (with
`numpy.ma`, which `np.unique` imports at its first call) is the costliest import both this
zygote's services (the records-manager) and the tokenizer zygote's (the dataset-manager, the
record-processors) need: imported here once, before the tokenizer zygote is forked, instead of
in both at once (~0.1 s of CPU on two busy cores), with OpenBLAS at one thread
(`import_numpy_single_threaded`). Importing them creates no loop and no thread of ours."""


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def import_numpy_single_threaded() -> None:
    """Import numpy with OpenBLAS's thread pool at one thread (unless the user set
    `OPENBLAS_NUM_THREADS`), then give the environment back: its pool's threads start at the
    import and spin for work that never comes (~0.04 s of CPU on two busy cores in a one-request
    run). The children forked later inherit the single-threaded BLAS (the services' only BLAS
    calls are 1-D dot products in the summary); their environment is the user's."""
    if "numpy" in sys.modules or BLAS_THREADS_ENV in os.environ:
        return
    os.environ[BLAS_THREADS_ENV] = "1"
    try:
        importlib.import_module("numpy")
    finally:
        del os.environ[BLAS_THREADS_ENV]


class Zygote:
    """Serves spawn requests (see the module doc) until stdin closes."""

    def __init__(self, *, preload: list[str], tokenizer: str | None, proto_in: int, proto_out: int,
                 fork_ahead: frozenset[str] = FORKED_AHEAD,
                 tokenizer_modules: frozenset[str] = TOKENIZER_MODULES, name: str = "zygote") -> None:
        self._fork_ahead = fork_ahead
        self._tokenizer_modules = tokenizer_modules  # empty: no tokenizer zygote
        self._name = name
        self._sub: tuple[int, int] | None = None  # the tokenizer zygote: (pid, request fd)
        self._preload: list[str] = []
        self._ahead: dict[str, tuple[int, int] | None] = {}  # module -> (pid, request fd); None: used
        self._tokenizer_spec = tokenizer
        self._add_preloads([*RUNTIME_MODULES, *preload])
        self._in, self._out = proto_in, proto_out
        self._tokenizer_loaded = tokenizer is None
        self._imported: set[str] = set()
        self._children: set[int] = set()
        self._buffer = b""
        self._pending: deque[dict[str, Any]] = deque()
        self._closed = False
        self._zygote_pid = os.getpid()

    def _emit(self, event: dict[str, Any]) -> None:
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(self._out, data):]

    def _mark(self, name: str) -> None:
        self._emit({"ev": "mark", "name": f"{self._name}.{name}", "t": time.time_ns()})

    def _add_preloads(self, modules: list[str]) -> None:
        for module in modules:
            if module in self._fork_ahead:
                self._ahead.setdefault(module, (0, -1))  # (0, -1): not forked yet
            elif module not in self._preload:
                self._preload.append(module)

    def _import(self, module: str) -> None:
        """Import `module` now; a failure is left for the child to hit again (and log)."""
        if module in self._imported:
            return
        self._imported.add(module)
        try:
            if module == "numpy":
                import_numpy_single_threaded()
            importlib.import_module(module)
        except Exception as exc:  # the child re-imports it and reports it in its own log
            print(f"zygote: preloading {module} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        self._mark(f"imported {module}")

    def _load_tokenizer(self) -> None:
        if self._tokenizer_loaded:
            return
        self._tokenizer_loaded = True
        try:
            from aiperf.tokenizer import TokenizerError, load_tokenizer

            load_tokenizer(self._tokenizer_spec)
        except (ImportError, TokenizerError) as exc:  # the services load it again and say why
            print(f"zygote: preloading the tokenizer failed: {exc}", file=sys.stderr)
        self._mark("tokenizer_loaded")

    def serve(self) -> int:
        """Fork services as they are asked for; report their exits; return at stdin EOF."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
        self._mark("serving")
        try:
            while not self._closed or self._children:
                self._reap()
                if self._closed:  # no more requests; children die with us (SIGTERM)
                    self._close_ahead()
                    break
                self._drain_requests()
                self._spawn_pending()
                idle = None if self._idle_work_done() else 0.0
                ready, _, _ = select.select([self._in, wake_r], [], [], idle)
                if wake_r in ready:
                    while True:
                        try:
                            if not os.read(wake_r, 512):
                                break
                        except BlockingIOError:
                            break
                if self._in in ready:
                    self._read_requests()
        finally:
            signal.set_wakeup_fd(-1)
        return 0

    def _wants_sub(self) -> bool:
        """Whether the tokenizer (and its users' modules) are the tokenizer zygote's job."""
        return bool(self._tokenizer_modules) and self._tokenizer_spec is not None

    def _own_modules(self) -> list[str]:
        """The preloads this zygote imports itself (not those of its tokenizer zygote)."""
        if not self._wants_sub():
            return self._preload
        return [m for m in self._preload if m not in self._tokenizer_modules]

    def _idle_work_done(self) -> bool:
        return ((self._tokenizer_loaded or self._sub is not None)
                and self._imported.issuperset(self._own_modules())
                and (0, -1) not in self._ahead.values())

    def _work_ahead(self) -> None:
        """One step of idle work (see the module doc)."""
        runtime = [m for m in RUNTIME_MODULES if m not in self._imported]
        ahead = [m for m, state in self._ahead.items() if state == (0, -1)]
        modules = [m for m in self._own_modules() if m not in self._imported]
        if runtime:
            self._import(runtime[0])
        elif ahead:
            self._fork_ahead_child(ahead[0])
        elif self._wants_sub() and self._sub is None:
            self._fork_tokenizer_zygote()
        elif modules:
            self._import(modules[0])
        elif self._sub is None:
            self._load_tokenizer()

    def _read_requests(self) -> None:
        chunk = os.read(self._in, 65536)
        if not chunk:
            self._closed = True
            return
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.strip():
                request = json.loads(line)
                if "configure" in request:
                    self._configure(request["configure"])
                else:
                    self._pending.append(request)

    def _configure(self, settings: dict[str, Any]) -> None:
        """Apply a `configure` request (see the module doc)."""
        if log := settings.get("log"):
            sys.stderr.flush()
            log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(log_fd, 2)
            os.dup2(log_fd, 1)
            os.close(log_fd)
        if (env := settings.get("env")) is not None:
            os.environ.clear()
            os.environ.update(env)
        self._add_preloads(settings.get("preload") or [])
        if (spec := settings.get("tokenizer")) is not None and spec != self._tokenizer_spec:
            self._tokenizer_spec, self._tokenizer_loaded = spec, False
        if self._sub is not None:  # its own preloads are fixed: the tokenizer users'
            self._forward({"configure": {k: v for k, v in settings.items() if k != "preload"}})
        self._mark("configured")

    def _drain_requests(self) -> None:
        """Read whatever else is already there without blocking, so one pass sees every
        request the launcher sent together."""
        while not self._closed and select.select([self._in], [], [], 0)[0]:
            self._read_requests()

    def _spawn_pending(self) -> None:
        """Fork the pending services: first those that need no tokenizer, then (after the
        load) the others."""
        later = [r for r in self._pending if r.get("tokenizer")]
        now = [r for r in self._pending if not r.get("tokenizer")]
        self._pending.clear()
        for request in now:
            self._spawn(request)
        if later and self._wants_sub():
            if self._sub is None:
                self._fork_tokenizer_zygote()
            later = [r for r in later if not self._forward(r)]
        if later:
            self._load_tokenizer()
            for request in later:
                self._spawn(request)
        if not self._pending:
            self._work_ahead()

    def _spawn(self, request: dict[str, Any]) -> None:
        argv: list[str] = request["argv"]
        if (pid := self._hand_over(request)) is None:
            for module in RUNTIME_MODULES:
                self._import(module)
            if argv[0] not in self._fork_ahead:
                self._import(argv[0])
            pid = self._fork(lambda: self._child(argv, request["log"], request.get("title") or argv))
        self._emit({"ev": "spawned", "id": request["id"], "pid": pid, "t": time.time_ns()})

    def _fork(self, child: Callable[[], int]) -> int:
        """Fork; the child runs `child` and exits with what it returns."""
        self._reap()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = child()
            finally:
                os._exit(code)
        self._children.add(pid)
        return pid

    def _fork_ahead_child(self, module: str) -> None:
        read_fd, write_fd = os.pipe()

        def child() -> int:
            os.close(write_fd)
            self._detach()
            with contextlib.suppress(Exception):  # `_child` imports it again and logs why it fails
                importlib.import_module(module)
            data = b""
            while chunk := os.read(read_fd, 65536):
                data += chunk
            if not data:  # never asked for
                return 0
            request = json.loads(data)
            os.environ.clear()
            os.environ.update(request["env"])
            argv = request["argv"]
            return self._child(argv, request["log"], request.get("title") or argv, detached=True)

        pid = self._fork(child)
        os.close(read_fd)
        self._ahead[module] = (pid, write_fd)
        self._mark(f"forked_ahead {module}")

    def _fork_tokenizer_zygote(self) -> None:
        """Fork the tokenizer zygote (see the module doc): it preloads `_tokenizer_modules`
        and the tokenizer, reads requests from a pipe of ours and reports on our event pipe."""
        read_fd, write_fd = os.pipe()
        spec = self._tokenizer_spec

        def child() -> int:
            os.close(write_fd)
            os.close(self._in)
            for _module, ahead in self._ahead.items():
                if ahead and ahead[1] >= 0:
                    os.close(ahead[1])
            die_with_parent(self._zygote_pid)
            modules = sorted(self._tokenizer_modules)
            set_cmdline([sys.executable, "-m", "aiperf.boot", "--zygote", "--tokenizer", str(spec),
                         "--preload", ",".join(modules)])
            sub = Zygote(preload=modules, tokenizer=spec, proto_in=read_fd, proto_out=self._out,
                         fork_ahead=frozenset(), tokenizer_modules=frozenset(), name="tokenizer-zygote")
            sub._imported.update(self._imported)  # already in this process
            return sub.serve()

        pid = self._fork(child)
        os.close(read_fd)
        self._sub = (pid, write_fd)
        self._mark("forked tokenizer-zygote")

    def _forward(self, request: dict[str, Any]) -> bool:
        """Send `request` to the tokenizer zygote; False when it is gone (then this zygote
        loads the tokenizer and forks its users itself from now on)."""
        if self._sub is None:
            return False
        data = (json.dumps(request, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._sub[1], data):]
        except BrokenPipeError:
            os.close(self._sub[1])
            self._sub, self._tokenizer_modules = None, frozenset()
            print("zygote: the tokenizer zygote is gone; loading the tokenizer here", file=sys.stderr)
            return False
        return True

    def _hand_over(self, request: dict[str, Any]) -> int | None:
        """Give `request` to the child forked ahead for its module, if one waits; its pid."""
        ahead = self._ahead.get(request["argv"][0])
        if not ahead or ahead[1] < 0:
            return None
        pid, fd = ahead
        self._ahead[request["argv"][0]] = None
        data = json.dumps({**request, "env": dict(os.environ)}).encode()
        try:
            while data:
                data = data[os.write(fd, data):]
        except BrokenPipeError:  # it died waiting (killed): fork one the usual way
            return None
        finally:
            os.close(fd)
        return pid

    def _close_ahead(self) -> None:
        """Tell the children forked ahead and never asked for to exit, and the tokenizer
        zygote that no request follows (their pipes close)."""
        for module, ahead in self._ahead.items():
            if ahead and ahead[1] >= 0:
                os.close(ahead[1])
                self._ahead[module] = None
        if self._sub is not None:
            os.close(self._sub[1])
            self._sub = None

    def _detach(self) -> None:
        """In a forked child: leave the zygote's signal handling, session and protocol pipes;
        get SIGTERM when the zygote dies."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        os.close(self._in)
        os.close(self._out)
        for _module, ahead in self._ahead.items():  # the other children's pipes are not ours
            if ahead and ahead[1] >= 0:
                os.close(ahead[1])
        if self._sub is not None:
            os.close(self._sub[1])
        die_with_parent(self._zygote_pid)

    def _child(self, argv: list[str], log_path: str, title: list[str], *, detached: bool = False) -> int:
        """In the forked child: become the service process and run it; returns its exit code.
        A service module's `main()` returns its exit code (every `main.py` here has one).
        `detached`: `_detach` already ran (a child forked ahead)."""
        if not detached:
            self._detach()
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.close(null_fd)
        set_cmdline(title)
        module = argv[0]
        sys.argv = list(argv)
        code = 0
        try:
            if module in NEEDS_RICH and sys.modules.get("rich", False) is None:
                del sys.modules["rich"]  # hidden while the zygote imported (see the module doc)
                for name in ("rich.console", "rich.table"):  # for its table, now rather than at the end
                    importlib.import_module(name)
            if module in self._fork_ahead:  # imported in this child (again, if that failed)
                importlib.import_module(module)
            entry = getattr(sys.modules.get(module), "main", None)
            if callable(entry):  # preloaded: call its `main()` (what its `__main__` block does)
                returned = entry()
                code = returned if isinstance(returned, int) else 0
            else:  # not preloaded (its import failed in the zygote): run it as `python -m` would
                runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:  # our bug: the traceback goes to the service log
            traceback.print_exc()
            code = 1
        try:
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return code

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                self._children.clear()
                return
            if pid == 0:
                return
            self._children.discard(pid)
            self._emit({"ev": "exited", "pid": pid, "code": os.waitstatus_to_exitcode(status),
                        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "t": time.time_ns()})


def main(argv: list[str]) -> NoReturn:
    """`--zygote` entry of `aiperf.boot`: serves until stdin closes, then exits the process."""
    parser = argparse.ArgumentParser(prog="aiperf.boot --zygote")
    parser.add_argument("--preload", default="", help="comma-separated modules to import once")
    parser.add_argument("--tokenizer", default=None, help="tokenizer to load before forking its users")
    parser.add_argument("--fork-ahead", default=",".join(sorted(FORKED_AHEAD)),
                        help="comma-separated modules a child imports after its fork, forked ahead")
    parser.add_argument("--tokenizer-modules", default=",".join(sorted(TOKENIZER_MODULES)),
                        help="comma-separated modules whose services use the tokenizer: a tokenizer "
                             "zygote preloads them (empty: this zygote does)")
    parser.add_argument("--config", default="", help="the run's config (shown in ps; unused)")
    parser.add_argument("--title-room", default="", help="placeholder: room for the children's titles")
    args = parser.parse_args(argv)
    started = time.time_ns()
    proto_in, proto_out = os.dup(0), os.dup(1)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(2, 1)  # a stray print at import must not corrupt the protocol
    os.close(null_fd)
    title = list(sys.orig_argv)
    if "--title-room" in title:  # ps shows the zygote without the placeholder
        del title[title.index("--title-room"):title.index("--title-room") + 2]
    set_cmdline(title)
    zygote = Zygote(preload=[m for m in args.preload.split(",") if m], tokenizer=args.tokenizer,
                    proto_in=proto_in, proto_out=proto_out,
                    fork_ahead=frozenset(m for m in args.fork_ahead.split(",") if m),
                    tokenizer_modules=frozenset(m for m in args.tokenizer_modules.split(",") if m))
    zygote._emit({"ev": "mark", "name": "zygote.started", "t": started})
    code = zygote.serve()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing to clean up: skip tearing down every preloaded module (~1 s)
