"""`kube attach NAME`: follow a running run's progress from its controller pod's api container,
through the API server's pod proxy (no port-forward, no kubectl).

It opens `WS .../pods/POD:9090/proxy/ws/progress` (the api sends a snapshot at once and after
every change) and renders each snapshot; when the upgrade is refused (an api without the
WebSocket route, a proxy in between that does not upgrade) it polls `GET .../proxy/api/progress`
instead. It ends when the api reports the run done, failed or cancelled, or when the run's
AIPerfJob/JobSet says it ended (a lost connection is reopened while the run goes on).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

import aiohttp
import anyio
from kubernetes_asyncio.client import ApiClient
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from aiperf.cli.kube_commands import EXIT_FAILED, EXIT_OK, _error, _open, run_async
from aiperf.cli.kube_options import KubeTarget
from aiperf.kube import jobs, ops
from aiperf.kube.client import KubeClusterError, KubeError
from aiperf.kube.names import CONTROLLER_JOB, jobset_name
from aiperf.kube.ops import _path
from aiperf.messages import SystemState

Snapshot = dict[str, Any]
FINAL_STATES = frozenset({SystemState.DONE, SystemState.FAILED, SystemState.CANCELLED})
PROGRESS_PATH, WS_PATH = "/api/progress", "/ws/progress"


class Renderer(Protocol):
    """Shows snapshots of the api's `RunView` (`state`, `reason`, `progress` per phase, ...)."""

    def update(self, snapshot: Snapshot) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


def _phase_progress(snapshot: Snapshot) -> tuple[str, dict[str, Any]] | None:
    """The progress of the phase running last (profiling over warmup), or None."""
    progress = snapshot.get("progress") or {}
    for phase in ("profiling", "warmup", *progress):
        if phase in progress:
            return phase, progress[phase]
    return None


class LineRenderer:
    """One line per change of state or progress (for logs and pipes)."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic,
                 emit: Callable[[str], None] | None = None) -> None:
        self._name, self._clock, self._t0 = name, clock, clock()
        self._emit = emit or (lambda line: print(line, flush=True))
        self._last: tuple[Any, ...] | None = None

    def update(self, snapshot: Snapshot) -> None:
        current = _phase_progress(snapshot)
        key: tuple[Any, ...] = (snapshot.get("state"), current)
        if key == self._last:
            return
        self._last = key
        line = f"run {self._name}: {snapshot.get('state', '?')}"
        if current is not None:
            phase, p = current
            line += (f", {phase} {p.get('completed', 0)}/{p.get('expected') or '?'} requests, "
                     f"{p.get('errors', 0)} errors")
        self.note(line)

    def note(self, text: str) -> None:
        self._emit(f"[{self._clock() - self._t0:6.1f}s] {text}")

    def close(self) -> None:
        return None


class BarRenderer:
    """The local `--ui simple` bar: phase, a bar of requests done, errors, elapsed time; state
    changes printed above it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("errors {task.fields[errors]}"), TimeElapsedColumn(),
                             console=Console(), transient=False)
        self._task: TaskID | None = None
        self._state: str | None = None
        self._bar.start()

    def update(self, snapshot: Snapshot) -> None:
        if snapshot.get("state") != self._state:
            self._state = snapshot.get("state")
            self.note(f"run {self._name}: {self._state}")
        current = _phase_progress(snapshot)
        if current is None:
            return
        phase, p = current
        if self._task is None:
            self._task = self._bar.add_task(phase, total=p.get("expected"), errors=0)
        self._bar.update(self._task, description=phase, completed=p.get("completed", 0),
                         total=p.get("expected"), errors=p.get("errors", 0))

    def note(self, text: str) -> None:
        self._bar.console.print(text)

    def close(self) -> None:
        self._bar.stop()


class _Refused(Exception):
    """The WebSocket upgrade was refused with this HTTP status: poll instead."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class ProgressClient:
    """Reads the api's progress of one pod through the API server's pod proxy, with the
    ApiClient's own session, TLS settings and credentials."""

    def __init__(self, api: ApiClient, namespace: str, pod: str, port: int = ops.API_PORT) -> None:
        self._api = api
        self._base = str(api.configuration.host).rstrip("/") + _path("v1", "pods", namespace, f"{pod}:{port}", "proxy")
        self.pod = pod

    async def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        await self._api.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    def _session(self) -> aiohttp.ClientSession:
        session: aiohttp.ClientSession = self._api.rest_client.pool_manager
        return session

    async def stream(self, on_snapshot: Callable[[Snapshot], bool]) -> bool:
        """Feed every snapshot the WebSocket sends to `on_snapshot` until it returns True (the
        run ended: return True) or the socket closes (return False). `_Refused` when the
        upgrade is refused; KubeError when the proxy forbids it."""
        try:
            socket = await self._session().ws_connect(self._base + WS_PATH, headers=await self._headers(),
                                                      proxy=self._api.rest_client.proxy, heartbeat=30.0)
        except aiohttp.WSServerHandshakeError as exc:
            _check_status(exc.status, self.pod)
            raise _Refused(exc.status) from None
        async with socket:
            async for message in socket:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    snapshot = message.json()
                except ValueError:
                    continue  # not a snapshot: the next one will do
                if isinstance(snapshot, dict) and on_snapshot(snapshot):
                    return True
        return False

    async def poll(self) -> Snapshot:
        """One `GET /api/progress`. KubeError when the proxy forbids it, KubeClusterError when
        the api cannot be reached or answers an error."""
        async with self._session().get(self._base + PROGRESS_PATH, headers=await self._headers(),
                                       proxy=self._api.rest_client.proxy) as response:
            _check_status(response.status, self.pod)
            if response.status != 200:
                raise KubeClusterError(f"GET {PROGRESS_PATH} on pod {self.pod} answered {response.status}")
            snapshot: Snapshot = await response.json(content_type=None)
            return snapshot


def _check_status(status: int, pod: str) -> None:
    if status in (401, 403):
        raise KubeError(f"not allowed to reach pod {pod} through the API server ({status}): "
                        "you need get on pods/proxy in the run's namespace")


async def _run_ended(api: ApiClient, name: str, namespace: str) -> tuple[str, bool] | None:
    """(state, succeeded) when the run's AIPerfJob or JobSet says it ended; None while it runs.
    KubeError when there is no such run."""
    job = await jobs.get_job(api, name, namespace)
    if job is not None:
        phase = jobs.phase_of(job)
        return (str(phase), phase == "Completed") if phase in jobs.TERMINAL_PHASES else None
    jobset = await ops.get_jobset(api, name, namespace)
    if jobset is None:
        raise KubeError(f"no run {name} in namespace {namespace}; `aiperf kube list -n {namespace}` shows the runs")
    state = ops.jobset_state(jobset)
    if state in ops.TERMINAL or state == ops.JobState.SUSPENDED:
        return str(state), state == ops.JobState.COMPLETED
    return None


async def _serving_pod(api: ApiClient, name: str, namespace: str) -> str | None:
    """The controller pod when it is Running, else None."""
    pods = await ops.list_pods(api, name, namespace, replicated_job=CONTROLLER_JOB)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return str(running[-1]["metadata"]["name"]) if running else None


async def attach(api: ApiClient, name: str, namespace: str, renderer: Renderer, *, interval: float = 1.0) -> int:
    """Render run `name`'s progress until it ends; exit 0 when it completed, 1 when it failed or
    was cancelled. Waits (checking every `interval` s) while the controller pod is not running
    yet, reconnects after a lost connection, polls every `interval` s when WebSockets are refused."""
    final: list[Snapshot] = []

    def on_snapshot(snapshot: Snapshot) -> bool:
        renderer.update(snapshot)
        if snapshot.get("state") in FINAL_STATES:
            final.append(snapshot)
            return True
        return False

    websocket, waiting_noted = True, False
    while not final:
        ended = await _run_ended(api, name, namespace)
        if ended is not None:
            renderer.note(f"run {name} {ended[0]}")
            return EXIT_OK if ended[1] else EXIT_FAILED
        pod = await _serving_pod(api, name, namespace)
        if pod is None:
            if not waiting_noted:
                renderer.note(f"waiting for the controller pod of run {name} ({jobset_name(name)}) to run")
                waiting_noted = True
            await anyio.sleep(interval)
            continue
        client = ProgressClient(api, namespace, pod)
        try:
            if websocket:
                try:
                    if not await client.stream(on_snapshot):
                        await anyio.sleep(interval)  # closed before the end: the api stopping, or a cut
                    continue
                except _Refused as refused:
                    if refused.status == 503:  # the pod's api is not listening (yet, or any more)
                        await anyio.sleep(interval)
                        continue
                    renderer.note(f"WebSocket refused ({refused.status}); polling {PROGRESS_PATH} "
                                  f"every {interval:g}s")
                    websocket = False
            if not on_snapshot(await client.poll()):
                await anyio.sleep(interval)
        except (aiohttp.ClientError, KubeClusterError):
            await anyio.sleep(interval)  # the pod went or the connection broke: check the run again
    snapshot = final[0]
    if snapshot["state"] == SystemState.DONE:
        renderer.note(f"run {name} done; `aiperf kube results {name} --from-pods -n {namespace}` downloads it")
        return EXIT_OK
    reason = f": {snapshot['reason']}" if snapshot.get("reason") else ""
    _error(f"run {name} {snapshot['state']}{reason}")
    return EXIT_FAILED


def attach_command(target: KubeTarget, name: str, *, interval: float) -> int:
    """`kube attach NAME`: `attach` with a bar on a terminal, lines otherwise. Ctrl-C detaches
    (exit 130); the run goes on."""
    if interval <= 0:
        _error(f"--interval {interval}: must be more than 0 seconds")
        return 2
    renderer: Renderer = BarRenderer(name) if sys.stdout.isatty() else LineRenderer(name)

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            return await attach(api, name, namespace, renderer, interval=interval)

    try:
        return run_async(work)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        print(f"\ndetached; the run goes on (`aiperf kube attach {name}` again)", file=sys.stderr)
        return 130
    finally:
        renderer.close()
