"""Wires a whole run around the system-controller: the ZMQ context, the control ROUTER
(bound before any service starts, closed after all have stopped), the launcher and the
driver. Used by the CLI in-process and by the system-controller's own `main.py`."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, nullcontext
from pathlib import Path
from typing import Protocol

import anyio

from aiperf.comms import Channel, Publisher, RouterSocket, Subscriber, load_curve, zmq_context
from aiperf.config import RunConfig
from aiperf.messages import Event, SystemState, SystemStateChanged, ToController
from aiperf.runtime import addressing_of
from aiperf.runtime.control_server import ControlServer
from aiperf.servermetrics import HttpFetch
from aiperf.servermetrics.endpoints import endpoints_of
from aiperf.servermetrics.manager import ServerMetricsManager, topics
from aiperf.system_controller.launcher import Launcher, LocalLauncher, NoLauncher
from aiperf.system_controller.plan import plan_services
from aiperf.system_controller.service import BringUpDriver, Driver, SystemController, Verdict
from aiperf.system_controller.startup_trace import StartupTrace
from aiperf.system_controller.zygote_launcher import ZygoteLauncher
from aiperf.zygote_process import ZYGOTE_ENV, ZygoteProcess

STATE_EVERY_S = 1.0
"""How often the controller repeats its state on the event bus (`repeat_state`)."""


class EventSource(Protocol):
    """Event-bus broadcasts, one at a time (`aiperf.comms.Subscriber`)."""

    async def recv(self) -> Event: ...


class RunObserver(Protocol):
    """Follows a run while it lasts (`aiperf.system_controller.job_status.RunTracker` in
    operator mode, the CLI's `--ui dashboard`): told every `SystemState`, given the controller
    (its registry of services) before it starts, and fed the event-bus topics it names."""

    TOPICS: tuple[bytes, ...]

    def watch(self, controller: SystemController) -> None: ...

    async def on_state(self, state: SystemState) -> None: ...

    async def follow(self, events: EventSource) -> None: ...


def log_tail(path: Path, lines: int = 3) -> str:
    """The last non-empty lines of a service log, joined, for failure messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    tail = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(tail)


async def run_system(config: RunConfig, *, config_path: str, launcher: Launcher | None = None,
                     driver: Driver | None = None,
                     on_state: Callable[[SystemState], Awaitable[None]] | None = None,
                     on_controller: Callable[[SystemController], None] | None = None,
                     tracker: RunObserver | None = None, trace: StartupTrace | None = None,
                     zygote: ZygoteProcess | None = None) -> Verdict:
    """Run every service of `config` to the end and return the verdict.

    `launcher` defaults to `default_launcher` (local processes forked by a zygote, or none in
    Kubernetes mode); `driver` to
    bring-up only. `on_controller` receives the controller before it starts (to wire
    Ctrl+C to `cancel`). `tracker` (operator mode) follows the controller's states, its
    registry and the event bus's phase and progress broadcasts while the run lasts (any
    `RunObserver` likewise). `trace` (`--profile-startup`) gets the run's states, the zygote's
    marks and every service's registration. `zygote`: one started early by the command, for
    the default launcher to adopt (unused otherwise: the caller still closes it)."""
    if tracker is not None:
        on_state = _both(on_state, tracker.on_state)
    if trace is not None:
        on_state = _both(on_state, trace.on_state)
        on_controller = _also_traced(on_controller, trace)
    log_dir = Path(config.artifact_dir) / "logs"
    Path(config.comms.ipc_dir).mkdir(parents=True, exist_ok=True)
    async with AsyncExitStack() as stack:
        if launcher is None:
            launcher = await stack.enter_async_context(default_launcher(config, config_path, log_dir, zygote))
        if trace is not None and isinstance(launcher, ZygoteLauncher):
            stack.callback(lambda: trace.extend(launcher.marks))
        return await _run_system(config, config_path=config_path, launcher=launcher, driver=driver,
                                 on_state=on_state, on_controller=on_controller, tracker=tracker,
                                 log_dir=log_dir, trace=trace)
    raise AssertionError("unreachable")  # pragma: no cover  (mypy: the stack may swallow)


async def _follow_server_metrics(metrics: ServerMetricsManager, fetch: HttpFetch, events: Subscriber,
                                 baseline: anyio.Event) -> None:
    """Open `fetch`, take the baseline scrape (then set `baseline`) and follow the run until
    cancelled. A task beside the services' start-up, not before it: opening the session and
    the first scrape cost ~0.5 s that a local run's start-up would otherwise wait for. The
    session stays open until cancelled: `metrics.close` scrapes once more (GPU telemetry)."""
    async with fetch:
        async with anyio.create_task_group() as tg:
            await tg.start(metrics.run, events)
            baseline.set()
        await anyio.sleep_forever()


def default_launcher(config: RunConfig, config_path: str, log_dir: Path,
                     zygote: ZygoteProcess | None = None) -> AbstractAsyncContextManager[Launcher]:
    """Kubernetes: none (the cluster starts the containers). Locally: the zygote
    (`ZygoteLauncher`; `zygote`: one already started, adopted), or one interpreter per service
    with `AIPERF_ZYGOTE=0`."""
    if config.kubernetes:
        return nullcontext(NoLauncher())
    if os.environ.get(ZYGOTE_ENV, "1") == "0":
        return nullcontext(LocalLauncher(config_path=config_path, log_dir=log_dir))
    return ZygoteLauncher(config=config, config_path=config_path, log_dir=log_dir,
                          planned=plan_services(config.services), zygote=zygote)


async def _run_system(config: RunConfig, *, config_path: str, launcher: Launcher, driver: Driver | None,
                      on_state: Callable[[SystemState], Awaitable[None]] | None,
                      on_controller: Callable[[SystemController], None] | None,
                      tracker: RunObserver | None, log_dir: Path,
                      trace: StartupTrace | None = None) -> Verdict:
    addressing = addressing_of(config)
    with zmq_context(load_curve(config.comms.curve_keys_dir)) as ctx:
        async with RouterSocket[ToController](ctx, decode=ToController, channel="control",
                                              bind=addressing.bind_endpoints(Channel.CONTROL)) as router, \
                Publisher(ctx, connect=[addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]) as events:
            # Every state change is broadcast (best effort: states before the event-bus-proxy is
            # up are dropped) so the api's /health, progress stream and `kube attach` see it.
            on_state = _both(on_state, lambda state: events.publish(SystemStateChanged(state=state)))
            # Kubernetes: the server-metrics-manager container scrapes, in-cluster. GPU telemetry
            # (on unless disabled) rides along: it tries AIPerf's default DCGM endpoints.
            scrapes = bool(endpoints_of(config.benchmark)) or config.benchmark.gpu_telemetry.enabled
            with_metrics = scrapes and not config.kubernetes and config.mode == "profile"
            baseline = anyio.Event()
            controller = SystemController(
                config=config, launcher=launcher,
                control=ControlServer(router, planned={p.service_id: p.service_type
                                                       for p in plan_services(config.services)}),
                driver=driver or BringUpDriver(), on_state=on_state,
                describe_failure=lambda sid: log_tail(log_dir / f"{sid}.log"),
                before_drive=baseline.wait if with_metrics else None)
            if on_controller is not None:
                on_controller(controller)
            bus = [addressing.connect_endpoint(Channel.EVENT_BUS_BACKEND)]
            async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
                if tracker is not None:
                    tracker.watch(controller)
                    # Not `events`: the state callback above publishes through that name.
                    broadcasts = await stack.enter_async_context(
                        Subscriber(ctx, connect=bus, topics=tracker.TOPICS))
                    tg.start_soon(tracker.follow, broadcasts)
                metrics = None
                if with_metrics:
                    fetch = HttpFetch()
                    metrics = ServerMetricsManager(config=config, fetch=fetch)
                    bus_events = await stack.enter_async_context(
                        Subscriber(ctx, connect=bus, topics=topics()))
                    tg.start_soon(_follow_server_metrics, metrics, fetch, bus_events, baseline)
                async with anyio.create_task_group() as repeating:
                    repeating.start_soon(repeat_state, events.publish, lambda: controller.state)
                    verdict = await controller.run()
                    repeating.cancel_scope.cancel()
                if verdict.exit_codes and None not in verdict.exit_codes.values():
                    # Every local service has exited, the event-bus-proxy too: the last states
                    # broadcast have nowhere to go; closing must not wait for them.
                    events.drop_unsent()
                if metrics is not None:  # before the caller writes the results-ready marker
                    await metrics.close()
                    if trace is not None:
                        trace.mark("server metrics finished")
                tg.cancel_scope.cancel()
        if trace is not None:
            trace.mark("controller sockets closed")
        return verdict


async def repeat_state(publish: Callable[[Event], Awaitable[None]], state: Callable[[], SystemState], *,
                       every_s: float = STATE_EVERY_S) -> None:
    """Broadcast `SystemStateChanged(state())` every `every_s` seconds until cancelled.

    A state is broadcast once when it changes; a subscriber whose subscription had not yet
    reached the publisher through the proxy then (ZMQ's slow joiner: the api subscribes as it
    starts, and a run now goes from all registered to profiling in ~50 ms) would miss it and
    read "unknown" until the next change. The repeat bounds that to `every_s`."""
    while True:
        await anyio.sleep(every_s)
        await publish(SystemStateChanged(state=state()))


def _also_traced(on_controller: Callable[[SystemController], None] | None,
                 trace: StartupTrace) -> Callable[[SystemController], None]:
    """Wraps `on_controller` to also take the services' registration marks once the run ends."""
    def both(controller: SystemController) -> None:
        if on_controller is not None:
            on_controller(controller)
        trace.on_finish(lambda: trace.add_services(controller.services))
    return both


def _both(first: Callable[[SystemState], Awaitable[None]] | None,
          second: Callable[[SystemState], Awaitable[None]]) -> Callable[[SystemState], Awaitable[None]]:
    async def both(state: SystemState) -> None:
        if first is not None:
            await first(state)
        await second(state)
    return both


async def run_cancellable(config: RunConfig, *, config_path: str, driver: Driver | None = None,
                          launcher: Launcher | None = None,
                          on_cancel: Callable[[], None] | None = None,
                          tracker: RunObserver | None = None, trace: StartupTrace | None = None,
                          zygote: ZygoteProcess | None = None) -> Verdict:
    """`run_system` where the first SIGINT/SIGTERM is a graceful cancel (`on_cancel` is told,
    the driver stops and results are still written) and a second SIGINT aborts at once
    (`KeyboardInterrupt`)."""
    holder: list[SystemController] = []

    async def on_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                if on_cancel is not None:
                    on_cancel()
                for controller in holder:
                    controller.cancel()
                break
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                raise KeyboardInterrupt

    async with anyio.create_task_group() as tg:
        tg.start_soon(on_signals)
        verdict = await run_system(config, config_path=config_path, launcher=launcher, driver=driver,
                                   on_controller=holder.append, tracker=tracker, trace=trace,
                                   zygote=zygote)
        tg.cancel_scope.cancel()
    return verdict
