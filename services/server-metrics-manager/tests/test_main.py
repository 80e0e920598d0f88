"""The server-metrics manager (its own image in the controller pod) as a real process: it follows phase broadcasts of an event bus (here an XPUB socket of the test, bound where
the pod's proxy would be), scrapes a real mock server, writes the exports when the profiling
phase completes and exits 0 once the run-ended marker appears; a bad config is exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import msgspec
import zmq

from aiperf.comms import Channel
from aiperf.config import Benchmark, CommsOptions, Endpoint, RunConfig, dump_run_config
from aiperf.config.markers import END_MARKER, SERVER_METRICS_READY_MARKER
from aiperf.messages import Phase, PhaseComplete, PhaseStarted, topic_of
from aiperf.mock_server.testing import running_mock
from aiperf.runtime import addressing_of
from aiperf.servermetrics.manager import PROJECTION_FILE

DEADLINE_S = 60.0


def _wait(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _entry(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", "import sys; from aiperf.server_metrics_manager.main import main; "
                             "sys.exit(main(sys.argv[1:]))", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_bad_config_is_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from aiperf.server_metrics_manager.main import main

    assert main(["--config", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read run config")


def test_the_container_entry_exports_the_profiling_phase_and_exits_on_the_end_marker(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    with running_mock("--output-tokens", "3") as server:
        config = RunConfig(run_id="r", mode="profile", artifact_dir=str(artifacts),
                           comms=CommsOptions(ipc_dir=str(tmp_path / "ipc"), tcp_bind_host=None),
                           benchmark=Benchmark(models=["m"], endpoint=Endpoint(urls=[server.url])))
        (tmp_path / "ipc").mkdir()
        dump_run_config(config, tmp_path / "run_config.json")
        ctx = zmq.Context()
        bus = ctx.socket(zmq.XPUB)
        bus.setsockopt(zmq.LINGER, 0)
        bus.bind(addressing_of(config).connect_endpoint(Channel.EVENT_BUS_BACKEND))
        proc = _entry("--config", str(tmp_path / "run_config.json"))
        try:
            assert bus.poll(int(DEADLINE_S * 1000)), "the entry never subscribed"
            subscriptions = set()
            while bus.poll(200):
                subscriptions.add(bus.recv()[1:])
            assert {b"phasestarted", b"phasecomplete"} <= subscriptions
            _wait(lambda: (artifacts / SERVER_METRICS_READY_MARKER).exists(), "the ready marker")

            def publish(event: PhaseStarted | PhaseComplete) -> None:
                bus.send_multipart([topic_of(event), msgspec.msgpack.encode(event)])

            publish(PhaseStarted(phase=Phase.PROFILING, started_at_ns=1))
            _wait(lambda: (artifacts / PROJECTION_FILE).exists(), "the first projection")
            for _ in range(2):
                body = json.dumps({"messages": [{"role": "user", "content": "a b"}]}).encode()
                request = urllib.request.Request(server.url + "/v1/chat/completions", data=body,
                                                 headers={"content-type": "application/json"})
                with urllib.request.urlopen(request, timeout=30) as answer:
                    assert answer.status == 200
            publish(PhaseComplete(phase=Phase.PROFILING, issued=2, returned=2))
            _wait(lambda: (artifacts / "server_metrics_export.csv").exists(), "the export")
            (artifacts / END_MARKER).write_text("{}")
            _, err = proc.communicate(timeout=DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            bus.close()
            ctx.term()
    assert proc.returncode == 0, err[-2000:]
    doc = json.loads((artifacts / "server_metrics_export.json").read_text())
    (tokens,) = doc["metrics"]["vllm:generation_tokens"]["series"]
    assert tokens["stats"]["total"] == 2 * 3
    projection = json.loads((artifacts / PROJECTION_FILE).read_text())
    (projected,) = projection["metrics"]["vllm:generation_tokens"]["series"]
    assert projected["stats"] == {"rate": tokens["stats"]["rate"]}
