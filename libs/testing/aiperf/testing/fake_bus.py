"""The event bus for fakes: the real proxy, and a tap that watches and publishes events."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import anyio
import msgspec
import structlog
import zmq.asyncio
from anyio.abc import TaskStatus

from aiperf.comms import Addressing, BadMessage, Channel, EventBusProxy, Publisher, Subscriber
from aiperf.messages import Event

log = structlog.get_logger("aiperf.testing")


@dataclass
class EventTap:
    """A subscriber to every topic of the event bus (each event is logged as `fake_bus.event`
    and kept in `events`) and a publisher, both connected to the proxy (a fake one or the real
    event-bus-proxy service)."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    events: list[Event] = field(default_factory=list)
    _publisher: Publisher | None = None
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    async def run(self, *, task_status: TaskStatus[EventTap] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect both sockets, then receive until cancelled."""
        async with AsyncExitStack() as stack:
            subscriber = await stack.enter_async_context(Subscriber(
                self.ctx, connect=[self.addressing.connect_endpoint(Channel.EVENT_BUS_BACKEND)]))
            self._publisher = await stack.enter_async_context(Publisher(
                self.ctx, connect=[self.addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]))
            task_status.started(self)
            while True:
                try:
                    event = await subscriber.recv()
                except BadMessage as exc:
                    log.warning("fake_bus.bad_event", reason=exc.reason)
                    continue
                self.events.append(event)
                log.info("fake_bus.event", kind=type(event).__name__, fields=msgspec.to_builtins(event))
                self._arrived.set()
                self._arrived = anyio.Event()

    async def publish(self, event: Event) -> None:
        """Broadcast `event` (best effort, like every broadcast)."""
        assert self._publisher is not None, "publish before run"
        await self._publisher.publish(event)

    async def wait_for(self, matches: Callable[[Event], bool], *, timeout: float) -> Event:
        """The first event seen (earlier or later) that `matches`; raises `TimeoutError`."""
        with anyio.fail_after(timeout):
            return await self._first(matches)

    async def _first(self, matches: Callable[[Event], bool]) -> Event:
        seen = 0
        while True:
            for event in self.events[seen:]:
                if matches(event):
                    return event
            seen = len(self.events)
            await self._arrived.wait()

    async def publish_until_seen(self, event: Event, *, timeout: float, every_s: float = 0.1) -> None:
        """Publish `event` every `every_s` until this tap receives it back through the proxy
        (a subscription takes a moment to reach the publisher); raises `TimeoutError`."""
        with anyio.fail_after(timeout):
            while True:
                await self.publish(event)
                with anyio.move_on_after(every_s):
                    await self._first(lambda e: e == event)
                    return


@dataclass
class FakeEventBus:
    """The event bus of a run without the event-bus-proxy service: the real XSUB/XPUB proxy
    bound on the run's endpoints, with an `EventTap` on it."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    tap: EventTap | None = None

    async def run(self, *, task_status: TaskStatus[EventTap] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind the proxy and connect the tap; runs until cancelled."""
        proxy = EventBusProxy(self.ctx, frontend=self.addressing.bind_endpoints(Channel.EVENT_BUS_FRONTEND),
                              backend=self.addressing.bind_endpoints(Channel.EVENT_BUS_BACKEND))
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            self.tap = await tg.start(EventTap(self.ctx, self.addressing).run)
            task_status.started(self.tap)
