"""Garbage on the wire: frames that are not msgpack, truncated messages, unknown message kinds and
messages of a newer version, sent to every socket a local run binds while it runs. The run must
finish normally: every bad frame is logged and dropped, nothing dies, the accounting balances."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import zmq
from e2e._harness import aiperf_process, jsonl_count, wait_for

from aiperf.messages import Heartbeat, Message, Progress, ServiceState

pytestmark = pytest.mark.slow


class Teleport(Message, frozen=True, kw_only=True):
    """A message kind no build knows."""

    request_id: str = "t-1"


class HeartbeatV2(Message, frozen=True, kw_only=True, tag="heartbeat"):
    """A heartbeat from a newer build: one more field."""

    service_id: str
    state: ServiceState
    sent_at_ns: int = 0
    zone: str = "eu"


def bad_frames() -> list[bytes]:
    real = msgspec.msgpack.encode(Heartbeat(service_id="x", state=ServiceState.RUNNING))
    return [b"\x00\xffnot msgpack", real[: len(real) // 2], msgspec.msgpack.encode(Teleport()),
            msgspec.msgpack.encode({"kind": 7}), b""]


def test_bad_frames_on_every_bound_socket_are_dropped(tmp_path: Path) -> None:
    from aiperf.mock_server.testing import running_mock

    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "10", "--itl-ms", "5", "--output-tokens", "16") as server:
        proc = aiperf_process("profile", "--model", "mock", "--url", server.url, "--streaming",
                              "--concurrency", "4", "--request-count", "300", "--workers-max", "2", "--ui", "simple",
                              artifacts=artifacts)
        wait_for(lambda: jsonl_count(artifacts) >= 10, 90, "the first records")
        ipc = json.loads((artifacts / "run_config.json").read_text())["comms"]["ipc_dir"]
        ctx = zmq.Context()
        try:
            targets = [("control", zmq.DEALER), ("credits", zmq.DEALER), ("credit_returns", zmq.PUSH),
                       ("records", zmq.PUSH), ("raw_records-g0-0", zmq.PUSH)]
            for name, kind in targets:
                sock = ctx.socket(kind)
                sock.setsockopt(zmq.LINGER, 2000)
                if kind == zmq.DEALER:
                    sock.setsockopt(zmq.IDENTITY, b"intruder")
                sock.connect(f"ipc://{ipc}/{name}.ipc")
                for frame in bad_frames():
                    sock.send(frame)
                if name == "control":
                    sock.send(msgspec.msgpack.encode(HeartbeatV2(service_id="intruder", state=ServiceState.RUNNING)))
                sock.close()
            bus = ctx.socket(zmq.PUB)
            bus.setsockopt(zmq.LINGER, 2000)
            bus.connect(f"ipc://{ipc}/event_bus_frontend.ipc")
            newer = msgspec.msgpack.encode(Progress(phase="profiling", completed=1, errors=0))

            def delivered() -> bool:
                """Send a batch; True once the api (subscribed to everything) saw a bad one. A PUB
                drops what it sends before the proxy's subscription reaches it."""
                for frame in [*bad_frames(), newer]:
                    bus.send_multipart([b"progress", frame])
                bus.send_multipart([b"progress"])  # one frame only
                return "api.bad_event" in (artifacts / "logs" / "api.log").read_text()

            wait_for(delivered, 30, "a bad broadcast to reach a subscriber")
            bus.close()
        finally:
            ctx.destroy(linger=2000)
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    assert "accounting: profiling: issued 300 = ok 300 + failed 0 + cancelled 0" in out, out[-2000:]
    summary = json.loads((artifacts / "profile_export_aiperf.json").read_text())
    assert summary["aiperf_extensions"]["accounting_balanced"]
