"""`aiperf dev-fakes --for TYPE`: each of the nine services, as a real process, alone against the
fakes of its peers. Each test starts the fakes, starts the service with the command they print,
waits (with a deadline) for what proves the service did its job, then stops both with Ctrl+C
(the system-controller ends its run by itself) and expects exit code 0 from each."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiperf.mock_server.testing import running_mock, timeout_scale

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0 * timeout_scale()
REQUESTS = 3

Event = dict[str, Any]


class Output:
    """The lines a child process writes (stdout and stderr merged), read by a thread so that
    waiting for a line honours its deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True)
        self._thread.start()
        self._ended = False

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, matches: Callable[[str], bool], *, timeout: float = DEADLINE_S) -> str:
        """The first line (already read or still to come) that `matches`; fails at the deadline."""
        for line in self.lines:
            if matches(line):
                return line
        deadline = time.monotonic() + timeout
        while not self._ended and (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self._ended = True
                break
            self.lines.append(line)
            if matches(line):
                return line
        raise AssertionError("line not seen before the deadline; output so far:\n" + "".join(self.lines))

    def event(self, name: str, *, where: Callable[[Event], bool] = lambda e: True,
              timeout: float = DEADLINE_S) -> Event:
        """The first JSON log line of event `name` satisfying `where`."""
        line = self.wait_for(lambda ln: (e := _parse(ln)) is not None and e.get("event") == name and where(e),
                             timeout=timeout)
        parsed = _parse(line)
        assert parsed is not None
        return parsed

    def count(self, name: str) -> int:
        """How many log lines of event `name` were read so far."""
        return sum(1 for ln in self.lines if (e := _parse(ln)) is not None and e.get("event") == name)

    def rest(self) -> str:
        """Everything, after the process ended."""
        self._thread.join(timeout=10)
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


def _parse(line: str) -> Event | None:
    if not line.startswith("{"):
        return None
    try:
        parsed: Event = json.loads(line)
    except ValueError:
        return None
    return parsed


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def fakes_and_service(tmp_path: Path, service: str, *flags: str) -> Iterator[tuple[Output, Output,
                                                                                    subprocess.Popen[str],
                                                                                    subprocess.Popen[str]]]:
    """Start `aiperf dev-fakes --for service`, then the service with the command it printed.
    Yields (fakes output, service output, fakes process, service process); kills leftovers."""
    fakes = subprocess.Popen(
        [sys.executable, "-m", "aiperf.cli", "dev-fakes", "--for", service, "--dir", str(tmp_path / "dev"),
         "--requests", str(REQUESTS), *flags],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs = [fakes]
    try:
        fakes_out = Output(fakes)
        printed = fakes_out.wait_for(lambda ln: ln.startswith("(or: "))
        words = shlex.split(printed.strip().removeprefix("(or: ").removesuffix(")"))
        assignments = {}
        while "=" in words[0]:
            name, value = words.pop(0).split("=", 1)
            assignments[name] = value
        assert words[:3] == ["aiperf", "service", service]
        proc = subprocess.Popen([sys.executable, "-m", "aiperf.cli", *words[1:]], env=env() | assignments,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        yield fakes_out, Output(proc), fakes, proc
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            assert proc.stdout is not None
            proc.stdout.close()


def stop_both(fakes: subprocess.Popen[str], service: subprocess.Popen[str], fakes_out: Output,
              service_out: Output) -> None:
    """Ctrl+C the fakes: they send the service `Shutdown`; both must exit 0."""
    fakes.send_signal(signal.SIGINT)
    fakes_out.event("dev.shutdown_sent")
    assert service.wait(timeout=DEADLINE_S) == 0, service_out.rest()
    assert fakes.wait(timeout=DEADLINE_S) == 0, fakes_out.rest()


def reply(out: Output, command: str) -> Event:
    """The logged reply to `command` (`reply`: its type, `fields`: its fields); fails on a
    `dev.command_failed` first."""
    line = out.wait_for(lambda ln: (e := _parse(ln)) is not None and e.get("command") == command
                        and e.get("event") in ("dev.reply", "dev.command_failed"))
    event = _parse(line)
    assert event is not None and event["event"] == "dev.reply", line
    return event


def test_worker(tmp_path: Path) -> None:
    with (running_mock("--output-tokens", "8") as server,
          fakes_and_service(tmp_path, "worker", "--url", server.url) as (out, service_out, fakes, service)):
        assert reply(out, "ProfileConfigure")["reply"] == "Ack"
        out.event("fake_tm.credit_returned", where=lambda e: e["num"] == REQUESTS - 1)
        assert out.count("fake_tm.credit_returned") == REQUESTS
        records = [e for ln in out.lines if (e := _parse(ln)) and e.get("event") == "fake_rp.record"]
        assert [r["status"] for r in records] == [200] * REQUESTS
        stop_both(fakes, service, out, service_out)


def test_record_processor(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "record-processor") as (out, service_out, fakes, service):
        assert reply(out, "ProfileConfigure")["reply"] == "Ack"
        last = out.event("fake_rm.record", where=lambda e: e["num"] == REQUESTS - 1)
        assert "time_to_first_token" in last["metrics"] and "inter_token_latency" in last["metrics"]
        assert out.count("fake_rm.record") == REQUESTS
        stop_both(fakes, service, out, service_out)


def test_records_manager(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "records-manager") as (out, service_out, fakes, service):
        finalized = reply(out, "Finalize")
        assert finalized["reply"] == "Finalized" and finalized["fields"]["balanced"] is True, finalized
        assert finalized["fields"]["request_count"] == REQUESTS
        artifacts = tmp_path / "dev" / "artifacts"
        summary = json.loads((artifacts / "profile_export_aiperf.json").read_text())
        assert summary["request_count"]["avg"] == REQUESTS
        assert len((artifacts / "profile_export.jsonl").read_text().splitlines()) == REQUESTS
        assert (artifacts / "profile_export_aiperf.csv").is_file()
        stop_both(fakes, service, out, service_out)


def test_timing_manager(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "timing-manager", "--workers", "2") as (out, service_out, fakes, service):
        assert reply(out, "ProfileConfigure")["reply"] == "Ack"
        profiling = reply(out, "ProfileStart")["fields"]["accounting"]["phases"]["profiling"]
        assert profiling["issued"] == profiling["returned"] == profiling["ok"] == REQUESTS, profiling
        assert out.count("fake_worker.connected") == 2
        assert out.count("fake_worker.credit_returned") == REQUESTS
        out.event("fake_bus.event", where=lambda e: e["kind"] == "PhaseComplete")
        stop_both(fakes, service, out, service_out)


def test_dataset_manager(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "dataset-manager") as (out, service_out, fakes, service):
        built = reply(out, "BuildDataset")
        assert built["reply"] == "DatasetBuilt" and built["fields"]["conversations"] == 5, built
        inputs = json.loads((tmp_path / "dev" / "artifacts" / "inputs.json").read_text())
        assert len(inputs["data"]) == 5
        stop_both(fakes, service, out, service_out)


def test_worker_group_manager(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "worker-group-manager") as (out, service_out, fakes, service):
        ready = reply(out, "PrepareGroup")
        assert ready["reply"] == "GroupReady" and ready["fields"]["group_id"] == "g0", ready
        assert ready["fields"]["members"] == ["worker-g0-0", "record-processor-g0-0"]
        assert ready["fields"]["conversations"] == 5
        stop_both(fakes, service, out, service_out)


def test_event_bus_proxy(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "event-bus-proxy") as (out, service_out, fakes, service):
        assert reply(out, "ProfileConfigure")["reply"] == "Ack"
        relayed = out.event("dev.relayed")
        out.event("fake_bus.event", where=lambda e: e["fields"]["reason"] == relayed["reason"])
        stop_both(fakes, service, out, service_out)


def test_api(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "api") as (out, service_out, fakes, service):
        assert reply(out, "ProfileConfigure")["reply"] == "Ack"
        checked = out.event("dev.api_checked")
        assert checked["health"] == {"status": "ok", "state": "profiling"}, checked
        assert checked["completed"] == REQUESTS
        assert checked["dataset_index_status"] == 200 and checked["dataset_index_bytes"] > 0
        stop_both(fakes, service, out, service_out)


def test_system_controller(tmp_path: Path) -> None:
    with fakes_and_service(tmp_path, "system-controller") as (out, controller_out, fakes, controller):
        assert controller.wait(timeout=DEADLINE_S) == 0, controller_out.rest()  # a whole run, then exit
        report = controller_out.rest()
        assert f"(fake records-manager) {REQUESTS} requests" in report
        assert f"accounting: profiling: issued {REQUESTS}, ok {REQUESTS}" in report
        ended = json.loads((tmp_path / "dev" / "artifacts" / ".aiperf_run_ended.json").read_text())
        assert ended == {"state": "done", "exit_code": 0, "reason": ""}  # what the results sidecar reads
        commands = out.event("dev.run_over")["commands"]
        assert commands["dataset-manager"] == ["BuildDataset", "Shutdown"]
        assert commands["worker-group-manager-g0"] == ["PrepareGroup", "Shutdown"]
        assert commands["timing-manager"] == ["ProfileConfigure", "ProfileStart", "Shutdown"]
        assert commands["records-manager"] == ["ProfileConfigure", "Finalize", "Shutdown"]
        for sid in ("event-bus-proxy", "api", "worker-g0-0", "record-processor-g0-0"):
            assert commands[sid] == ["ProfileConfigure", "Shutdown"], (sid, commands)
        fakes.send_signal(signal.SIGINT)
        assert fakes.wait(timeout=DEADLINE_S) == 0, out.rest()
