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
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp
import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from aiperf.cli.kube_pods import RunPods
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, error
from aiperf.kube.containers import API_PORT
from aiperf.kube.names import jobset_name
from aiperf.kubeapi import PODS, KubeApi, KubeClusterError, KubeError, proxy_path
from aiperf.messages import SystemState

Snapshot = dict[str, Any]
Ended = Callable[[], Awaitable[tuple[str, bool] | None]]
"""Whether the run ended, by its own record (the AIPerfJob's phase, the JobSet's state):
(state, succeeded), or None while it goes on."""
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


def renderer_for(name: str) -> Renderer:
    """A bar on a terminal, lines otherwise."""
    return BarRenderer(name) if sys.stdout.isatty() else LineRenderer(name)


class _Refused(Exception):
    """The WebSocket upgrade was refused with this HTTP status: poll instead."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class ProgressClient:
    """Reads the api's progress of one pod through the API server's pod proxy, with the
    ApiClient's own session, TLS settings and credentials."""

    def __init__(self, api: KubeApi, namespace: str, pod: str, port: int = API_PORT) -> None:
        self._api = api
        self._base = api.url(proxy_path(PODS, namespace, pod, port))
        self.pod = pod

    async def stream(self, on_snapshot: Callable[[Snapshot], bool]) -> bool:
        """Feed every snapshot the WebSocket sends to `on_snapshot` until it returns True (the
        run ended: return True) or the socket closes (return False). `_Refused` when the
        upgrade is refused; KubeError when the proxy forbids it."""
        try:
            socket = await self._api.session.ws_connect(self._base + WS_PATH, headers=await self._api.auth_headers(),
                                                        proxy=self._api.proxy, heartbeat=30.0)
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
        async with self._api.session.get(self._base + PROGRESS_PATH, headers=await self._api.auth_headers(),
                                         proxy=self._api.proxy) as response:
            _check_status(response.status, self.pod)
            if response.status != 200:
                raise KubeClusterError(f"GET {PROGRESS_PATH} on pod {self.pod} answered {response.status}")
            snapshot: Snapshot = await response.json(content_type=None)
            return snapshot


def _check_status(status: int, pod: str) -> None:
    if status in (401, 403):
        raise KubeError(f"not allowed to reach pod {pod} through the API server ({status}): "
                        "you need get on pods/proxy in the run's namespace")


async def attach(pods: RunPods, renderer: Renderer, *, ended: Ended, interval: float = 1.0) -> int:
    """Render the progress of the run of `pods` until it ends; exit 0 when it completed, 1 when
    it failed or was cancelled. Waits (checking every `interval` s) while the controller pod is
    not running yet, reconnects after a lost connection, polls every `interval` s when
    WebSockets are refused. `ended` tells when the run's own record says it is over."""
    name, namespace = pods.name, pods.namespace
    final: list[Snapshot] = []

    def on_snapshot(snapshot: Snapshot) -> bool:
        renderer.update(snapshot)
        if snapshot.get("state") in FINAL_STATES:
            final.append(snapshot)
            return True
        return False

    websocket, waiting_noted = True, False
    while not final:
        if (over := await ended()) is not None:
            renderer.note(f"run {name} {over[0]}")
            return EXIT_OK if over[1] else EXIT_FAILED
        pod = await pods.serving_pod()
        if pod is None:
            if not waiting_noted:
                renderer.note(f"waiting for the controller pod of run {name} ({jobset_name(name)}) to run")
                waiting_noted = True
            await anyio.sleep(interval)
            continue
        websocket = await _follow(ProgressClient(pods.api, namespace, pod), on_snapshot, renderer,
                                  websocket=websocket, interval=interval)
    snapshot = final[0]
    if snapshot["state"] == SystemState.DONE:
        renderer.note(f"run {name} done; `aiperf kube results {name} --from-pods -n {namespace}` downloads it")
        return EXIT_OK
    reason = f": {snapshot['reason']}" if snapshot.get("reason") else ""
    error(f"run {name} {snapshot['state']}{reason}")
    return EXIT_FAILED


async def _follow(client: ProgressClient, on_snapshot: Callable[[Snapshot], bool], renderer: Renderer, *,
                  websocket: bool, interval: float) -> bool:
    """One turn of following the pod's api: its WebSocket (or, once refused, one poll); whether
    to keep using the WebSocket. A lost connection or a pod that went waits `interval`."""
    try:
        if websocket:
            try:
                if not await client.stream(on_snapshot):
                    await anyio.sleep(interval)  # closed before the end: the api stopping, or a cut
                return True
            except _Refused as refused:
                if refused.status == 503:  # the pod's api is not listening (yet, or any more)
                    await anyio.sleep(interval)
                    return True
                renderer.note(f"WebSocket refused ({refused.status}); polling {PROGRESS_PATH} every {interval:g}s")
                websocket = False
        if not on_snapshot(await client.poll()):
            await anyio.sleep(interval)
    except (aiohttp.ClientError, KubeClusterError):
        await anyio.sleep(interval)  # the pod went or the connection broke: check the run again
    return websocket
