"""The api service over real HTTP on 127.0.0.1, its event state fed by a fake event source."""

from __future__ import annotations

import errno
import json
import socket
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
import zstandard
from yarl import URL

from aiperf.api.main import KUBERNETES_PORT, PORT_ENV, bind_address
from aiperf.api.service import Api
from aiperf.config import CommsOptions, RunConfig
from aiperf.messages import (
    DatasetConfigured,
    Event,
    Phase,
    PhaseComplete,
    PhaseStarted,
    ProfileConfigure,
    ProfileStart,
    Progress,
    SystemState,
    SystemStateChanged,
)
from aiperf.runtime import UnknownCommand, UserError
from aiperf.runtime.http import EmbeddedServer, granian_server
from tests._api_fakes import FakeEvents, Serving

pytestmark = pytest.mark.anyio

DATA = b"conversation bytes " * 1000
INDEX = b"\x01\x02\x03\x04" * 64


async def _get_json(http: aiohttp.ClientSession, url: str | URL) -> tuple[int, object]:
    async with http.get(url) as response:
        return response.status, await response.json(content_type=None)


async def test_health_reports_the_last_state(serving: Serving) -> None:
    async with serving() as run:
        assert await _get_json(run.http, f"{run.base}/health") == (200, {"status": "ok",
                                                                         "state": "unknown"})
        await run.feed(SystemStateChanged(state=SystemState.PROFILING))
        assert await _get_json(run.http, f"{run.base}/health") == (200, {"status": "ok",
                                                                         "state": "profiling"})


async def test_progress_keeps_latest_per_phase_and_phase_events(serving: Serving) -> None:
    async with serving() as run:
        await run.feed(PhaseStarted(phase=Phase.WARMUP, started_at_ns=1, expected_credits=5))
        await run.feed(Progress(phase=Phase.WARMUP, completed=2, errors=0, expected=5))
        await run.feed(Progress(phase=Phase.WARMUP, completed=5, errors=1, expected=5))
        await run.feed(PhaseComplete(phase=Phase.WARMUP, issued=5, returned=5))
        await run.feed(Progress(phase=Phase.PROFILING, completed=7, errors=0))
        status, body = await _get_json(run.http, f"{run.base}/api/progress")
    assert status == 200 and isinstance(body, dict)
    assert body["progress"]["warmup"]["completed"] == 5
    assert body["progress"]["warmup"]["errors"] == 1
    assert body["progress"]["profiling"]["completed"] == 7
    assert body["phases"]["warmup"]["started"]["expected_credits"] == 5
    assert body["phases"]["warmup"]["complete"]["returned"] == 5
    assert body["state"] == "unknown"


async def test_websocket_streams_a_snapshot_per_change(serving: Serving) -> None:
    async with serving() as run:
        ws = await run.http.ws_connect(f"{run.base}/ws/progress")
        first = await ws.receive_json()
        assert first["progress"] == {} and first["state"] == "unknown"
        await run.events.send(Progress(phase=Phase.PROFILING, completed=3, errors=0))
        with anyio.fail_after(5):
            while (snapshot := await ws.receive_json())["progress"] == {}:
                pass
        assert snapshot["progress"]["profiling"]["completed"] == 3
        await run.events.send(SystemStateChanged(state=SystemState.PROCESSING))
        with anyio.fail_after(5):
            while (snapshot := await ws.receive_json())["state"] != "processing":
                pass
        # Leaving the block stops the service: the socket gets the last snapshot, then a close
        # frame, not a reset.
        closing = ws
    with anyio.fail_after(5):
        last = await closing.receive()
        msg = await closing.receive()
    assert last.type is aiohttp.WSMsgType.TEXT and last.json()["jobPhase"] == "processing"
    assert msg.type is aiohttp.WSMsgType.CLOSED or msg.type is aiohttp.WSMsgType.CLOSE


async def test_websocket_client_leaving_is_not_an_error(serving: Serving) -> None:
    async with serving() as run:
        ws = await run.http.ws_connect(f"{run.base}/ws/progress")
        await ws.receive_json()
        await ws.close()
        assert run.api.in_flight is not None
        with anyio.fail_after(5):
            await run.api.in_flight.wait_idle()
        await run.feed(Progress(phase=Phase.PROFILING, completed=1, errors=0))


async def test_results_are_404_until_written(serving: Serving) -> None:
    async with serving() as run:
        status, body = await _get_json(run.http, f"{run.base}/api/results")
        assert status == 404 and isinstance(body, dict) and "not written" in body["detail"]
        summary = {"request_count": {"avg": 10}, "was_cancelled": False}
        (run.artifact_dir / "profile_export_aiperf.json").write_text(json.dumps(summary))
        assert await _get_json(run.http, f"{run.base}/api/results") == (200, summary)


@pytest.mark.parametrize("name", ["profile_export_aiperf.json", "profile_export_aiperf.csv",
                                  "profile_export.jsonl", "inputs.json"])
async def test_export_files_are_served(serving: Serving, name: str) -> None:
    async with serving() as run:
        async with run.http.get(f"{run.base}/api/results/files/{name}") as response:
            assert response.status == 404
        content = f"content of {name}\n".encode() * 100
        (run.artifact_dir / name).write_bytes(content)
        async with run.http.get(f"{run.base}/api/results/files/{name}") as response:
            assert response.status == 200
            assert await response.read() == content


@pytest.mark.parametrize("raw_name", ["..%2Frun_config.json", "%2E%2E%2F%2E%2E%2Fsecret.txt",
                                      "..%5Csecret.txt", ".secret.txt", "run_config.json",
                                      "dataset%2Fdataset.dat"])
async def test_path_traversal_is_refused(serving: Serving, raw_name: str) -> None:
    async with serving() as run:
        for target in (run.artifact_dir.parent / "secret.txt", run.artifact_dir / "run_config.json",
                       run.artifact_dir / ".secret.txt"):
            target.write_text("SECRET")
        url = URL(f"{run.base}/api/results/files/{raw_name}", encoded=True)
        async with run.http.get(url) as response:
            assert response.status in (400, 404)
            assert b"SECRET" not in await response.read()


async def test_symlink_out_of_the_artifact_dir_is_refused(serving: Serving, tmp_path: Path) -> None:
    async with serving() as run:
        (tmp_path / "secret.txt").write_text("SECRET")
        (run.artifact_dir / "inputs.json").symlink_to(tmp_path / "secret.txt")
        async with run.http.get(f"{run.base}/api/results/files/inputs.json") as response:
            assert response.status == 400
            assert b"SECRET" not in await response.read()


async def test_dataset_is_503_until_configured_then_plain_locally(serving: Serving) -> None:
    async with serving(kubernetes=False) as run:
        (run.dataset_dir / "dataset.dat").write_bytes(DATA)
        (run.dataset_dir / "index.dat").write_bytes(INDEX)
        status, body = await _get_json(run.http, f"{run.base}/api/dataset/dataset.dat")
        assert status == 503 and isinstance(body, dict) and "not configured" in body["detail"]
        await run.feed(DatasetConfigured(conversations=3, path=str(run.dataset_dir)))
        for name, content in (("dataset.dat", DATA), ("index.dat", INDEX)):
            async with run.http.get(f"{run.base}/api/dataset/{name}") as response:
                assert response.status == 200
                assert "Content-Encoding" not in response.headers
                assert await response.read() == content
        async with run.http.get(f"{run.base}/api/dataset/inputs.json") as response:
            assert response.status == 404


async def test_kubernetes_serves_the_stored_zst_as_is(serving: Serving) -> None:
    async with serving(kubernetes=True) as run:
        stored = {}
        for name, content in (("dataset.dat", DATA), ("index.dat", INDEX)):
            stored[name] = zstandard.ZstdCompressor(level=3).compress(content)
            (run.dataset_dir / f"{name}.zst").write_bytes(stored[name])
        async with run.http.get(f"{run.base}/api/dataset/dataset.dat") as response:
            assert response.status == 503
        await run.feed(DatasetConfigured(conversations=3, path=str(run.dataset_dir), compressed=True))
        for name, content in (("dataset.dat", DATA), ("index.dat", INDEX)):
            async with run.http.get(f"{run.base}/api/dataset/{name}") as response:
                assert response.status == 200
                assert response.headers["Content-Encoding"] == "zstd"
                body = await response.read()
            assert body == stored[name]
            assert zstandard.ZstdDecompressor().decompress(body) == content
        url = URL(f"{run.base}/api/dataset/..%2Fdataset.dat", encoded=True)
        async with run.http.get(url) as response:
            assert response.status in (400, 404)


async def test_profile_configure_is_answered_and_others_are_refused(serving: Serving) -> None:
    async with serving() as run:
        assert await run.api.handle(ProfileConfigure(request_id="r1", dataset_dir="x")) is None
        assert run.api.url == run.base and run.base.startswith("http://127.0.0.1:")
        with pytest.raises(UnknownCommand, match="ProfileStart"):
            await run.api.handle(ProfileStart(request_id="r2"))


async def test_configure_asked_before_listening_waits_for_the_server(tmp_path: Path) -> None:
    send, receive = anyio.create_memory_object_stream[Event]()
    api = Api(events=FakeEvents(receive), artifact_dir=tmp_path, dataset_dir=tmp_path,
              compressed_dataset=False, host="127.0.0.1", port=0, server_factory=granian_server)
    with send, receive:
        async with anyio.create_task_group() as tg:
            answered = anyio.Event()

            async def ask() -> None:
                await api.handle(ProfileConfigure(request_id="r1", dataset_dir="x"))
                answered.set()

            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            assert not answered.is_set()
            await tg.start(api.run)
            with anyio.fail_after(5):
                await answered.wait()
            assert api.url.startswith("http://127.0.0.1:")
            tg.cancel_scope.cancel()


async def test_the_port_it_picks_stays_its_own_until_its_server_listens(tmp_path: Path) -> None:
    # Another server binding the picked port before granian does (a busy host: CI's flake
    # "service api exited with code 2") is refused; the api listens on the port it picked.
    competitors: list[socket.socket] = []
    refused: list[int | None] = []

    def racing_factory(app: Any, host: str, port: int) -> EmbeddedServer:
        other = socket.socket()
        competitors.append(other)
        try:
            other.bind((host, port))
            other.listen()
        except OSError as exc:
            refused.append(exc.errno)
        return granian_server(app, host, port)

    send, receive = anyio.create_memory_object_stream[Event]()
    api = Api(events=FakeEvents(receive), artifact_dir=tmp_path, dataset_dir=tmp_path,
              compressed_dataset=False, host="127.0.0.1", port=0, server_factory=racing_factory)
    try:
        with send, receive:
            async with anyio.create_task_group() as tg:
                await tg.start(api.run)
                async with aiohttp.ClientSession() as session, session.get(f"{api.url}/health") as response:
                    assert response.status == 200
                tg.cancel_scope.cancel()
    finally:
        for other in competitors:
            other.close()
    assert refused == [errno.EADDRINUSE]


async def test_a_port_in_use_is_a_user_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        send, receive = anyio.create_memory_object_stream[Event]()
        api = Api(events=FakeEvents(receive), artifact_dir=tmp_path, dataset_dir=tmp_path,
                  compressed_dataset=False, host="127.0.0.1", port=port, server_factory=granian_server)
        with send, receive, pytest.raises(ExceptionGroup) as caught:
            async with anyio.create_task_group() as tg:
                await tg.start(api.run)
    assert caught.group_contains(UserError, match=f"127.0.0.1:{port}")


async def test_event_source_ending_keeps_serving(serving: Serving) -> None:
    async with serving() as run:
        await run.feed(SystemStateChanged(state=SystemState.READY))
        run.events.close()
        assert await _get_json(run.http, f"{run.base}/health") == (200, {"status": "ok",
                                                                         "state": "ready"})


def _config(*, kubernetes: bool) -> RunConfig:
    return RunConfig(run_id="r", comms=CommsOptions(ipc_dir="/tmp"), kubernetes=kubernetes)


def test_bind_address_defaults_and_env() -> None:
    assert bind_address(_config(kubernetes=False), {}) == ("127.0.0.1", 0)
    assert bind_address(_config(kubernetes=True), {}) == ("0.0.0.0", KUBERNETES_PORT)
    assert bind_address(_config(kubernetes=True), {PORT_ENV: "8123"}) == ("0.0.0.0", 8123)
    assert bind_address(_config(kubernetes=False), {PORT_ENV: "8123"}) == ("127.0.0.1", 8123)
    for bad in ("http", "-1", "70000"):
        with pytest.raises(UserError, match=PORT_ENV):
            bind_address(_config(kubernetes=False), {PORT_ENV: bad})
