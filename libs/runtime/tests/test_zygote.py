"""The zygote forks services that look like `python -m aiperf.boot MODULE ...` processes, logs
them to their own files and reports their exit codes (a real zygote process, real forks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from aiperf.zygote_process import ZygoteProcess

PROBE = '''
import os, sys, time
def main():
    gate = sys.argv[2]
    print("probe up", os.getpid(), flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(sys.argv[1])
'''


def _events(stream: IO[bytes]) -> Any:
    for line in stream:
        yield json.loads(line)


def _next(events: Any, kind: str) -> dict[str, Any]:
    for event in events:
        if event["ev"] == kind:
            return dict(event)
    raise AssertionError(f"the zygote ended before a {kind!r} event")


def _wait_for(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def zygote(tmp_path: Path) -> Any:
    (tmp_path / "zyg_probe.py").write_text(PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.boot", "--zygote", "--preload", "zyg_probe",
                             "--title-room", "_" * 400], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env)
    with proc:  # closes the pipes
        yield proc
        if proc.poll() is None:
            proc.kill()


def _spawn(proc: subprocess.Popen[bytes], sid: str, argv: list[str], log: Path) -> None:
    assert proc.stdin is not None
    title = [sys.executable, "-m", "aiperf.boot", *argv, "--service-id", sid]
    proc.stdin.write((json.dumps({"id": sid, "argv": argv, "log": str(log), "title": title}) + "\n").encode())
    proc.stdin.flush()


def test_forked_service_has_its_title_log_and_exit_code(zygote: subprocess.Popen[bytes], tmp_path: Path) -> None:
    assert zygote.stdout is not None
    events = _events(zygote.stdout)
    gate, log = tmp_path / "gate", tmp_path / "probe-1.log"
    _spawn(zygote, "probe-1", ["zyg_probe", "3", str(gate)], log)
    spawned = _next(events, "spawned")
    assert spawned["id"] == "probe-1"
    pid = spawned["pid"]
    _wait_for(lambda: log.exists() and "probe up" in log.read_text(), "the probe's log line")
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    assert cmdline == [a.encode() for a in [sys.executable, "-m", "aiperf.boot", "zyg_probe", "3", str(gate),
                                            "--service-id", "probe-1"]]
    assert os.getsid(pid) == pid  # its own session, like start_new_session=True
    gate.touch()
    exited = _next(events, "exited")
    assert (exited["pid"], exited["code"]) == (pid, 3)


def test_a_killed_service_reports_the_signal_and_stdin_eof_ends_the_zygote(
        zygote: subprocess.Popen[bytes], tmp_path: Path) -> None:
    assert zygote.stdout is not None and zygote.stdin is not None
    events = _events(zygote.stdout)
    _spawn(zygote, "probe-2", ["zyg_probe", "0", str(tmp_path / "never")], tmp_path / "probe-2.log")
    pid = _next(events, "spawned")["pid"]
    os.kill(pid, signal.SIGKILL)
    exited = _next(events, "exited")
    assert (exited["pid"], exited["code"]) == (pid, -signal.SIGKILL)
    zygote.stdin.close()
    assert zygote.wait(timeout=30) == 0


ENV_PROBE = '''
import os
def main():
    print("secret", os.environ.get("ZYG_SECRET"), flush=True)
    return 0
'''


def test_an_early_zygote_is_configured_before_its_first_fork(tmp_path: Path) -> None:
    """`configure`: later preloads, the environment every fork inherits, and its stderr moved
    from the early log to the run's (a preload that fails says so there)."""
    (tmp_path / "zyg_probe.py").write_text(PROBE)
    (tmp_path / "zyg_env.py").write_text(ENV_PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    early_log, run_log = tmp_path / "early.log", tmp_path / "zygote.log"
    zygote = ZygoteProcess.start(preload=["zyg_probe"], tokenizer=None, env=env, log_path=str(early_log),
                                 early=True)
    try:
        assert zygote.popen.stdout is not None
        events = _events(zygote.popen.stdout)
        zygote.send({"configure": {"preload": ["zyg_env", "zyg_missing"], "log": str(run_log),
                                   "env": {**env, "ZYG_SECRET": "s3"}}})
        names = []
        while "zygote.imported zyg_missing" not in names:
            names.append(_next(events, "mark")["name"])
        assert names.index("zygote.configured") < names.index("zygote.imported zyg_env")
        child_log = tmp_path / "env-1.log"
        zygote.send({"id": "env-1", "argv": ["zyg_env"], "log": str(child_log)})
        assert _next(events, "exited")["code"] == 0
        assert "secret s3" in child_log.read_text()
        assert "preloading zyg_missing failed" in run_log.read_text()
        assert "zyg_missing" not in early_log.read_text()
        assert zygote.popen.stdin is not None
        zygote.popen.stdin.close()
        assert zygote.popen.wait(timeout=30) == 0
    finally:
        zygote.close()
    assert not early_log.exists()  # an early zygote's log is temporary


def test_closing_an_unadopted_early_zygote_kills_it_and_removes_its_log(tmp_path: Path) -> None:
    (tmp_path / "zyg_probe.py").write_text(PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    log = tmp_path / "early.log"
    zygote = ZygoteProcess.start(preload=["zyg_probe"], tokenizer=None, env=env, log_path=str(log), early=True)
    assert zygote.popen.stdout is not None
    _next(_events(zygote.popen.stdout), "mark")  # it runs
    zygote.close()
    assert zygote.popen.returncode == -signal.SIGKILL
    assert not Path(f"/proc/{zygote.popen.pid}").exists()
    assert not log.exists()
    zygote.close()  # idempotent


AHEAD_PROBE = '''
import os, sys
with open(os.path.join(os.environ["ZYG_DIR"], f"imported-{os.getpid()}"), "w"):
    pass  # imported: in the child forked ahead, before any request named it
def main():
    print("ahead up", os.environ.get("ZYG_SECRET"), sys.argv[1:], flush=True)
    return 4
'''


def _start_with_fork_ahead(tmp_path: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    (tmp_path / "zyg_probe.py").write_text(PROBE)
    (tmp_path / "zyg_ahead.py").write_text(AHEAD_PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]), ZYG_DIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.boot", "--zygote", "--preload", "zyg_probe,zyg_ahead",
                             "--fork-ahead", "zyg_ahead", "--title-room", "_" * 400],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    return proc, env


def _imported_by(tmp_path: Path) -> int:
    _wait_for(lambda: list(tmp_path.glob("imported-*")), "the module imported by the child forked ahead")
    (marker,) = tmp_path.glob("imported-*")
    return int(marker.name.removeprefix("imported-"))


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_a_module_forked_ahead_is_imported_before_its_request_and_gets_the_configured_env(
        tmp_path: Path) -> None:
    proc, env = _start_with_fork_ahead(tmp_path)
    with proc:
        assert proc.stdout is not None and proc.stdin is not None
        events = _events(proc.stdout)
        ahead_pid = _imported_by(tmp_path)  # before any request
        assert ahead_pid != proc.pid
        proc.stdin.write((json.dumps({"configure": {"env": {**env, "ZYG_SECRET": "s4"}}}) + "\n").encode())
        log = tmp_path / "ahead-1.log"
        _spawn(proc, "ahead-1", ["zyg_ahead", "x"], log)
        spawned = _next(events, "spawned")
        assert (spawned["id"], spawned["pid"]) == ("ahead-1", ahead_pid)
        exited = _next(events, "exited")
        assert (exited["pid"], exited["code"]) == (ahead_pid, 4)
        assert "ahead up s4 ['x']" in log.read_text()
        assert len(list(tmp_path.glob("imported-*"))) == 1  # the zygote never imported it
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def test_a_child_forked_ahead_and_never_asked_for_exits_with_the_zygote(tmp_path: Path) -> None:
    proc, _ = _start_with_fork_ahead(tmp_path)
    with proc:
        assert proc.stdin is not None
        ahead_pid = _imported_by(tmp_path)
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        _wait_for(lambda: _gone(ahead_pid), "the child forked ahead to exit")


TOKENIZER_PROBE = '''
import os
from aiperf.tokenizer.loader import _load_builtin
with open(os.path.join(os.environ["ZYG_DIR"], f"tok-imported-{os.getpid()}"), "w"):
    pass
def main():
    print("tokenizers loaded before main:", _load_builtin.cache_info().currsize, flush=True)
    return 5
'''


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def test_tokenizer_users_come_from_a_tokenizer_zygote_that_loaded_it_beside_the_other_imports(
        tmp_path: Path) -> None:
    """The tokenizer and its users' modules load in a second zygote (another core); the first
    never imports them, forks everyone else and hands it the requests marked `tokenizer`."""
    (tmp_path / "zyg_probe.py").write_text(PROBE)
    (tmp_path / "zyg_tok.py").write_text(TOKENIZER_PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]), ZYG_DIR=str(tmp_path),
               AIPERF_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.boot", "--zygote", "--preload", "zyg_probe,zyg_tok",
                             "--tokenizer", "builtin", "--tokenizer-modules", "zyg_tok", "--title-room", "_" * 400],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    with proc:
        assert proc.stdout is not None and proc.stdin is not None
        events = _events(proc.stdout)
        tok_log, probe_log = tmp_path / "tok-1.log", tmp_path / "probe-1.log"
        proc.stdin.write((json.dumps({"id": "tok-1", "argv": ["zyg_tok"], "log": str(tok_log),
                                      "tokenizer": True}) + "\n").encode())
        _spawn(proc, "probe-1", ["zyg_probe", "0", str(tmp_path / "gate")], probe_log)
        (tmp_path / "gate").touch()
        seen: list[dict[str, Any]] = []
        while len([e for e in seen if e["ev"] == "exited"]) < 2:
            seen.append(next(events))
        spawned = {e["id"]: e["pid"] for e in seen if e["ev"] == "spawned"}
        exited = {e["pid"]: e["code"] for e in seen if e["ev"] == "exited"}
        assert exited == {spawned["tok-1"]: 5, spawned["probe-1"]: 0}
        marks = [e["name"] for e in seen if e["ev"] == "mark"]
        assert "tokenizer-zygote.tokenizer_loaded" in marks
        assert "zygote.tokenizer_loaded" not in marks and "zygote.imported zyg_tok" not in marks
        (imported,) = tmp_path.glob("tok-imported-*")
        sub_pid = int(imported.name.removeprefix("tok-imported-"))  # imported once, before the fork
        assert sub_pid != proc.pid and _ppid(sub_pid) == proc.pid
        assert "tokenizers loaded before main: 1" in tok_log.read_text()
        assert list(tmp_path.glob("cache/tokenizers/*.marshal"))  # the bundled ranks were cached
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        _wait_for(lambda: _gone(sub_pid), "the tokenizer zygote to exit with the zygote")
