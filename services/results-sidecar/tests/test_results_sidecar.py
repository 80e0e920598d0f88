"""The results sidecar over real HTTP on 127.0.0.1: the run's end from the end marker or from the
control plane's health port going away, the exports listed and served only after the end,
`POST /shutdown` and the linger time ending it, and the process exiting 0 (issue 10, item 8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from aiperf.config.markers import END_MARKER, READY_MARKER, SERVER_METRICS_DONE_MARKER
from aiperf.kube import KubeSettings
from aiperf.kube.containers import results_container
from aiperf.results_sidecar.main import ResultsServer, build_parser
from aiperf.runtime.http import free_tcp_port

pytestmark = pytest.mark.anyio

EXPORTS = {"profile_export_aiperf.json": b'{"ok": true}\n', "profile_export.jsonl": b"{}\n" * 500,
           "inputs.json": b'{"data": []}\n'}


def finish(artifacts: Path, *, exit_code: int = 0, ready: bool = True) -> None:
    """What the control plane leaves at the end of a run: exports, ready marker, end marker."""
    for name, body in EXPORTS.items():
        (artifacts / name).write_bytes(body)
    if ready:
        (artifacts / READY_MARKER).write_text(json.dumps({"ready": True, "was_cancelled": False, "partial": False}))
    state = "done" if exit_code == 0 else "failed"
    (artifacts / END_MARKER).write_text(json.dumps({"state": state, "exit_code": exit_code, "reason": ""}))


@asynccontextmanager
async def sidecar(artifacts: Path, **kwargs: Any) -> AsyncIterator[tuple[ResultsServer, aiohttp.ClientSession]]:
    """A `ResultsServer` on a free 127.0.0.1 port; yields it and an HTTP session. The caller ends
    it (shutdown or linger): leaving the block waits for `run` to return."""
    options: dict[str, Any] = {"controller_port": None, "linger_s": 600.0, "poll_s": 0.02, **kwargs}
    server = ResultsServer(artifact_dir=artifacts, host="127.0.0.1", port=0, **options)
    async with aiohttp.ClientSession() as http, anyio.create_task_group() as tg:
        await tg.start(server.run)
        yield server, http


async def status_of(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(f"{url}/api/status") as response:
        assert response.status == 200
        body: dict[str, Any] = await response.json()
        return body


async def wait_ended(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    with anyio.fail_after(10):
        while not (status := await status_of(http, url))["ended"]:
            await anyio.sleep(0.02)
    return status


async def test_exports_are_served_once_the_end_marker_is_there_then_shutdown_ends_it(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with sidecar(tmp_path) as (server, http):
            url = server.url
            assert url is not None
            assert (await status_of(http, url))["ended"] is False
            async with http.get(f"{url}/api/results/files") as early:
                assert early.status == 409  # the exports are not final while the run goes on
            finish(tmp_path)
            status = await wait_ended(http, url)
            assert status == {"ended": True, "how": "marker", "state": "done", "exit_code": 0, "reason": "",
                              "results_ready": True, "was_cancelled": False, "partial": False}
            async with http.get(f"{url}/api/results/files") as listing:
                assert await listing.json() == {"files": [{"name": n, "size": len(EXPORTS[n])} for n in sorted(EXPORTS)]}
            for name, body in EXPORTS.items():
                async with http.get(f"{url}/api/results/files/{name}") as response:
                    assert (response.status, await response.read()) == (200, body)
            async with http.get(f"{url}/api/results/files/profile_export_aiperf.csv") as absent:
                assert absent.status == 404
            async with http.get(f"{url}/api/results/files/{READY_MARKER}") as hidden:
                assert hidden.status == 400  # only export files, never the markers
            async with http.post(f"{url}/shutdown") as bye:
                assert bye.status == 202
        assert server.end is not None and server.end.succeeded


async def test_a_control_plane_gone_without_a_marker_ends_the_run_unsuccessfully(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")  # the control plane's health port
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener, sidecar(tmp_path, controller_port=port, gone_after_s=0.1) as (server, http):
            url = server.url
            assert url is not None
            assert (await status_of(http, url))["ended"] is False
            await listener.aclose()  # the control plane crashed: no end marker
            status = await wait_ended(http, url)
            assert (status["how"], status["exit_code"], status["results_ready"]) == ("controller-gone", None, False)
            finish(tmp_path)  # a control plane that was only slow to leave its marker: the marker wins
            assert (await status_of(http, url))["how"] == "marker"
            server.shutdown()


async def test_the_linger_time_after_the_end_ends_it_by_itself(tmp_path: Path) -> None:
    finish(tmp_path, exit_code=1, ready=False)  # a failed run: partial exports, still served
    with anyio.fail_after(30):
        async with sidecar(tmp_path, linger_s=0.2) as (server, _http):
            pass  # returns once the linger time is over, with no request
    assert server.end is not None and server.end.exit_code == 1 and not server.end.succeeded


async def test_the_run_ends_only_once_the_awaited_markers_are_there_too(tmp_path: Path) -> None:
    """The server-metrics container may write its exports after the control plane ended: the
    files are listed only once its marker is there, or after `wait_for_s` without it."""
    with anyio.fail_after(30):
        async with sidecar(tmp_path, wait_for=(SERVER_METRICS_DONE_MARKER,)) as (server, http):
            url = server.url
            assert url is not None
            finish(tmp_path)
            with anyio.move_on_after(0.5):  # 25 polls: the end marker alone does not end the run
                await wait_ended(http, url)
            assert (await status_of(http, url))["ended"] is False
            (tmp_path / "server_metrics_export.json").write_text("{}")
            (tmp_path / SERVER_METRICS_DONE_MARKER).write_text('{"exported": true}')
            await wait_ended(http, url)
            async with http.get(f"{url}/api/results/files") as listing:
                assert "server_metrics_export.json" in {f["name"] for f in (await listing.json())["files"]}
            server.shutdown()
        never = tmp_path / "never"  # a server-metrics container that never finishes: served anyway
        never.mkdir()
        finish(never)
        async with sidecar(never, wait_for=(SERVER_METRICS_DONE_MARKER,), wait_for_s=0.2) as (server, http):
            assert server.url is not None
            assert (await wait_ended(http, server.url))["how"] == "marker"
            server.shutdown()


def test_the_kube_container_starts_this_sidecar_with_flags_it_knows() -> None:
    container = results_container(KubeSettings(name="r", ttl_seconds=120))
    assert container["image"] == "localhost/aiperf/results-sidecar:latest"
    args = build_parser().parse_args(container["args"])
    assert (args.artifact_dir, args.port, args.controller_health_port, args.linger_s, args.wait_for) == (
        "/aiperf/artifacts", 9091, 8080, 120.0, [])
    scraping = results_container(KubeSettings(name="r", ttl_seconds=120), server_metrics=True)
    assert build_parser().parse_args(scraping["args"]).wait_for == [SERVER_METRICS_DONE_MARKER]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **extra}


async def test_the_process_serves_its_probes_and_exits_0_on_post_shutdown(tmp_path: Path) -> None:
    finish(tmp_path)
    port, health = free_tcp_port("127.0.0.1"), free_tcp_port("127.0.0.1")
    argv = [sys.executable, "-m", "aiperf.results_sidecar.main", "--artifact-dir", str(tmp_path),
            "--host", "127.0.0.1", "--port", str(port)]
    with subprocess.Popen(argv, env=_env(AIPERF_HEALTH_PORT=str(health)), stderr=subprocess.PIPE) as proc:
        try:
            async with aiohttp.ClientSession() as http:
                with anyio.fail_after(30):
                    while True:
                        try:
                            async with http.get(f"http://127.0.0.1:{health}/readyz") as ready:
                                if ready.status == 200:
                                    break
                        except aiohttp.ClientConnectionError:
                            pass
                        await anyio.sleep(0.05)
                    async with http.get(f"http://127.0.0.1:{port}/api/results/files/inputs.json") as response:
                        assert await response.read() == EXPORTS["inputs.json"]
                    async with http.post(f"http://127.0.0.1:{port}/shutdown") as bye:
                        assert bye.status == 202
            code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        assert code == 0, proc.stderr.read().decode() if proc.stderr else ""
