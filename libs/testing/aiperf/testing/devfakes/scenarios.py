"""Per service type: the fakes of its peers, and the script the fake controller plays once it
registers (the commands the real system-controller would send, in order, every reply logged)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import msgspec
import structlog
import zmq.asyncio
from anyio.abc import TaskGroup

from aiperf.comms import Addressing
from aiperf.messages import (
    BuildDataset,
    Command,
    DatasetConfigured,
    Event,
    Finalize,
    Phase,
    PhaseAccounting,
    PhaseStarted,
    PrepareGroup,
    ProfileConfigure,
    ProfileStart,
    Progress,
    Reply,
    RunAccounting,
    ServiceType,
    SystemState,
    SystemStateChanged,
)
from aiperf.runtime.control_server import ControlServer
from aiperf.testing.devfakes.fixture import API_PORT_ENV, Fixture
from aiperf.testing.fake_bus import EventTap, FakeEventBus
from aiperf.testing.fake_workers import FakeWorkers
from aiperf.testing.fakes import FakeRecordProcessor, FakeRecordsManager, FakeTimingManager
from aiperf.testing.feeds import MetricRecordFeed, RawRecordFeed

log = structlog.get_logger("aiperf.testing.devfakes")

R = TypeVar("R", bound=Reply)

CONFIGURE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 600.0


@dataclass
class Target:
    """The service under test, as the fake controller sees it."""

    control: ControlServer
    service_id: str

    async def ask(self, command: Command[R], *, timeout: float = CONFIGURE_TIMEOUT_S) -> R | None:
        """Send `command`, log the reply (`dev.reply`) or the failure (`dev.command_failed`);
        returns the reply, None when it failed (the fakes keep running)."""
        name = type(command).__name__
        log.info("dev.ask", service=self.service_id, command=name)
        try:
            reply = await self.control.ask(self.service_id, command, timeout=timeout)
        except Exception as exc:  # shown to the developer; the session goes on
            log.warning("dev.command_failed", service=self.service_id, command=name,
                        error=f"{type(exc).__name__}: {exc}")
            return None
        fields = {k: v for k, v in msgspec.to_builtins(reply).items()
                  if k not in ("kind", "request_id", "service_id")}
        log.info("dev.reply", service=self.service_id, command=name, reply=type(reply).__name__, fields=fields)
        return reply

    def request_id(self, what: str) -> str:
        """A fresh request id."""
        return self.control.new_request_id(f"dev-{what}")

    async def configure(self, dataset_dir: str) -> bool:
        """`ProfileConfigure(dataset_dir)`; True when it was carried out."""
        return await self.ask(ProfileConfigure(request_id=self.request_id("configure"),
                                               dataset_dir=dataset_dir)) is not None


class Scenario(Protocol):
    """The fakes of one service type's peers (`start`) and the controller's script (`drive`,
    run again each time the service registers anew)."""

    async def start(self, tg: TaskGroup) -> None: ...

    async def drive(self, target: Target) -> None: ...


@dataclass(frozen=True)
class Env:
    """What every scenario's fakes share: the session's files, ZMQ context and addressing."""

    fixture: Fixture
    ctx: zmq.asyncio.Context
    addressing: Addressing

    @property
    def dataset_dir(self) -> str:
        """The written dataset."""
        return str(self.fixture.dataset_dir)

    async def start_bus(self, tg: TaskGroup) -> EventTap:
        """The event bus (every service connects to it), its events logged."""
        tap: EventTap = await tg.start(FakeEventBus(self.ctx, self.addressing).run)
        return tap


@dataclass
class WorkerScenario:
    """Fake timing-manager (credits, `requests` per worker, after `ProfileConfigure`) and fake
    record-processor (logs each raw record); the worker sends to the LLM server at `--url`."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        ids = self.env.fixture.conversation_ids
        self.tm = FakeTimingManager(self.env.ctx, self.env.addressing, credits_per_worker=self.env.fixture.requests,
                                    conversation_ids=lambda n: ids[n % len(ids)])
        await self.env.start_bus(tg)
        await tg.start(self.tm.run)
        await tg.start(FakeRecordProcessor(self.env.ctx, self.env.addressing, index=f"{self.env.fixture.group_id}-0").run)

    async def drive(self, target: Target) -> None:
        if self.tm.armed.is_set():  # a restarted worker gets credits only once configured again
            self.tm.armed = anyio.Event()
        if await target.configure(self.env.dataset_dir):
            self.tm.armed.set()


@dataclass
class RecordProcessorScenario:
    """`ProfileConfigure`, then `requests` streamed raw records pushed as a worker would; a fake
    records-manager logs each `MetricRecord` (`fake_rm.record`)."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        await self.env.start_bus(tg)
        await tg.start(FakeRecordsManager(self.env.ctx, self.env.addressing).run)
        self.feed: RawRecordFeed = await tg.start(RawRecordFeed(
            self.env.ctx, self.env.addressing, index=f"{self.env.fixture.group_id}-0",
            conversation_ids=self.env.fixture.conversation_ids).run)

    async def drive(self, target: Target) -> None:
        if await target.configure(self.env.dataset_dir):
            await self.feed.push(self.env.fixture.requests)


@dataclass
class RecordsManagerScenario:
    """`ProfileConfigure`, `requests` metric records pushed as a record-processor would, then
    `Finalize` with the matching accounting: the exports are written under `artifacts/`."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        await self.env.start_bus(tg)
        self.feed: MetricRecordFeed = await tg.start(MetricRecordFeed(
            self.env.ctx, self.env.addressing, conversation_ids=self.env.fixture.conversation_ids).run)

    async def drive(self, target: Target) -> None:
        if not await target.configure(self.env.dataset_dir):
            return
        n = self.env.fixture.requests
        await self.feed.push(n)
        accounting = RunAccounting(phases={Phase.PROFILING: PhaseAccounting(
            issued=n, returned=n, sent=n, ok=n)})
        await target.ask(Finalize(request_id=target.request_id("finalize"), accounting=accounting),
                         timeout=RUN_TIMEOUT_S)


@dataclass
class TimingManagerScenario:
    """`workers_per_group` fake workers on the credit channels (handshake, then an ok return per
    credit), `ProfileConfigure` (answered once they are connected), then `ProfileStart`: the
    accounting is logged."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        await self.env.start_bus(tg)
        self.workers: FakeWorkers = await tg.start(FakeWorkers(
            self.env.ctx, self.env.addressing, count=self.env.fixture.config.services.workers_per_group,
            group_id=self.env.fixture.group_id or "g0").run)

    async def drive(self, target: Target) -> None:
        configured = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._announce)
            configured = await target.configure(self.env.dataset_dir)
        if configured:
            await target.ask(ProfileStart(request_id=target.request_id("start")), timeout=RUN_TIMEOUT_S)

    async def _announce(self) -> None:
        try:
            await self.workers.announce(timeout=CONFIGURE_TIMEOUT_S)
        except TimeoutError:
            log.warning("dev.workers_not_connected", hint="the timing-manager never answered a TimePing")


@dataclass
class DatasetManagerScenario:
    """`BuildDataset`: the dataset files and `inputs.json` are written under `artifacts/`; the
    `DatasetConfigured` broadcast shows in the event log."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        await self.env.start_bus(tg)

    async def drive(self, target: Target) -> None:
        await target.ask(BuildDataset(request_id=target.request_id("dataset")), timeout=RUN_TIMEOUT_S)


@dataclass
class WorkerGroupManagerScenario:
    """`PrepareGroup` with the written dataset: `GroupReady` names the group's members."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        await self.env.start_bus(tg)

    async def drive(self, target: Target) -> None:
        await target.ask(PrepareGroup(request_id=target.request_id("group"), dataset_dir=self.env.dataset_dir),
                         timeout=RUN_TIMEOUT_S)


@dataclass
class EventBusProxyScenario:
    """A publisher and a subscriber on the proxy's two sides: after `ProfileConfigure`, an event
    is published until it comes back through the proxy (`dev.relayed`)."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        self.tap: EventTap = await tg.start(EventTap(self.env.ctx, self.env.addressing).run)

    async def drive(self, target: Target) -> None:
        if not await target.configure(self.env.dataset_dir):
            return
        probe = SystemStateChanged(state=SystemState.READY, reason=f"dev-fakes probe {target.request_id('probe')}")
        try:
            await self.tap.publish_until_seen(probe, timeout=CONFIGURE_TIMEOUT_S)
        except TimeoutError:
            log.warning("dev.not_relayed", kind="SystemStateChanged")
            return
        log.info("dev.relayed", kind="SystemStateChanged", reason=probe.reason)


@dataclass
class ApiScenario:
    """`ProfileConfigure` (answered once the api listens), then the dataset, a state change, a
    phase start and progress published on the bus until `GET /api/progress` shows them;
    `/health` and `/api/dataset/index.dat` are read too (`dev.api_checked`)."""

    env: Env

    async def start(self, tg: TaskGroup) -> None:
        self.tap = await self.env.start_bus(tg)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.env.fixture.env[API_PORT_ENV]}"

    async def drive(self, target: Target) -> None:
        if not await target.configure(self.env.dataset_dir):
            return
        n = self.env.fixture.requests
        events: list[Event] = [DatasetConfigured(conversations=len(self.env.fixture.conversation_ids),
                                                 path=self.env.dataset_dir),
                               SystemStateChanged(state=SystemState.PROFILING),
                               PhaseStarted(phase=Phase.PROFILING, started_at_ns=1, expected_credits=n),
                               Progress(phase=Phase.PROFILING, completed=n, errors=0, expected=n)]
        try:
            with anyio.fail_after(CONFIGURE_TIMEOUT_S):
                while True:  # broadcasts are best effort: the api's subscription may still be on its way
                    for event in events:
                        await self.tap.publish(event)
                    progress = await self._get_json("/api/progress")
                    if (progress.get("state") == str(SystemState.PROFILING) and progress.get("dataset")
                            and progress.get("progress", {}).get("profiling", {}).get("completed") == n):
                        break
                    await anyio.sleep(0.2)
            health = await self._get_json("/health")
            status, index = await anyio.to_thread.run_sync(self._get, "/api/dataset/index.dat")
        except (TimeoutError, OSError, ValueError) as exc:
            log.warning("dev.api_check_failed", url=self.url, error=f"{type(exc).__name__}: {exc}")
            return
        log.info("dev.api_checked", url=self.url, health=health, state=progress.get("state"),
                 completed=n, dataset_index_status=status, dataset_index_bytes=len(index))

    async def _get_json(self, path: str) -> dict[str, Any]:
        """The JSON body of `GET path`; raises `ValueError` unless it answered 200 with JSON."""
        status, body = await anyio.to_thread.run_sync(self._get, path)
        if status != 200:
            raise ValueError(f"GET {path}: HTTP {status}: {body[:200]!r}")
        parsed: dict[str, Any] = json.loads(body)
        return parsed

    def _get(self, path: str) -> tuple[int, bytes]:
        """(status, body) of `GET path` (blocks: run it in a thread)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as response:  # noqa: S310 (our own http URL)
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


SCENARIOS: dict[ServiceType, Callable[[Env], Scenario]] = {
    ServiceType.WORKER: WorkerScenario,
    ServiceType.RECORD_PROCESSOR: RecordProcessorScenario,
    ServiceType.RECORDS_MANAGER: RecordsManagerScenario,
    ServiceType.TIMING_MANAGER: TimingManagerScenario,
    ServiceType.DATASET_MANAGER: DatasetManagerScenario,
    ServiceType.WORKER_GROUP_MANAGER: WorkerGroupManagerScenario,
    ServiceType.EVENT_BUS_PROXY: EventBusProxyScenario,
    ServiceType.API: ApiScenario,
}
"""Every service type but the system-controller (whose fakes are the services themselves:
`aiperf.testing.fake_services`)."""


def scenario_for(fixture: Fixture, ctx: zmq.asyncio.Context, addressing: Addressing) -> Scenario:
    """The scenario of `fixture.service_type` (not the system-controller)."""
    return SCENARIOS[fixture.service_type](Env(fixture, ctx, addressing))
