"""PUB -> EventBusProxy (XSUB/XPUB) -> SUB over real sockets, and the proxy's shutdown."""

from __future__ import annotations

import socket

import anyio
import msgspec
import pytest
import zmq
import zmq.asyncio

from aiperf.comms import BadMessage, Channel, EventBusProxy, Publisher, Subscriber
from aiperf.messages import Event, Phase, PhaseStarted, Progress
from tests._comms_net import Net

pytestmark = pytest.mark.anyio

SENTINEL = -1


def _progress(completed: int) -> Progress:
    return Progress(phase=Phase.PROFILING, completed=completed, errors=0)


def _started() -> PhaseStarted:
    return PhaseStarted(phase=Phase.PROFILING, started_at_ns=1)


async def _until_sentinel(sub: Subscriber) -> list[Event]:
    got: list[Event] = []
    while True:
        event = await sub.recv()
        got.append(event)
        if isinstance(event, Progress) and event.completed == SENTINEL:
            return got


async def test_subscriber_gets_only_its_topic(net: Net, ctx: zmq.asyncio.Context) -> None:
    proxy = EventBusProxy(ctx, frontend=net.bind(Channel.EVENT_BUS_FRONTEND),
                          backend=net.bind(Channel.EVENT_BUS_BACKEND))
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.run)
        front, back = net.pick(proxy.bound_frontend), net.pick(proxy.bound_backend)
        async with (Publisher(ctx, connect=[front]) as pub,
                    Subscriber(ctx, connect=[back], topics=[b"progress"]) as progress_only,
                    Subscriber(ctx, connect=[back]) as everything):
            with anyio.fail_after(10):
                # Slow joiner: subscriptions travel SUB -> proxy -> PUB asynchronously, so
                # publish until both subscribers have seen a Progress.
                joined = anyio.Event()
                first: list[Event] = []

                async def first_progress() -> None:
                    first.append(await progress_only.recv())
                    while not isinstance(await everything.recv(), Progress):
                        pass
                    joined.set()

                tg.start_soon(first_progress)
                n = 0
                while not joined.is_set():
                    n += 1
                    await pub.publish(_started())
                    await pub.publish(_progress(n))
                    with anyio.move_on_after(0.02):
                        await joined.wait()
                assert isinstance(first[0], Progress)

                # Both joined: now every event published reaches `everything`, and only the
                # Progress ones reach `progress_only`.
                for i in range(3):
                    await pub.publish(_started())
                    await pub.publish(_progress(1000 + i))
                await pub.publish(_progress(SENTINEL))
                filtered, unfiltered = await _until_sentinel(progress_only), await _until_sentinel(
                    everything)
            tg.cancel_scope.cancel()
    assert all(isinstance(e, Progress) for e in filtered), filtered
    assert [e.completed for e in filtered if isinstance(e, Progress)][-4:] == [1000, 1001, 1002,
                                                                             SENTINEL]
    assert any(isinstance(e, PhaseStarted) for e in unfiltered)


async def _one_event_through(ctx: zmq.asyncio.Context, front: str, back: str) -> None:
    async with (Publisher(ctx, connect=[front]) as pub,
                Subscriber(ctx, connect=[back], topics=[b"progress"]) as sub):
        got = anyio.Event()

        async def receive() -> None:
            assert isinstance(await sub.recv(), Progress)
            got.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(receive)
            while not got.is_set():
                await pub.publish(_progress(1))
                with anyio.move_on_after(0.02):
                    await got.wait()


def _refused(endpoint: str) -> bool:
    """True when nothing listens on `endpoint` any more (a plain OS-level connect is refused)."""
    if endpoint.startswith("ipc://"):
        family, address = socket.AF_UNIX, endpoint.removeprefix("ipc://")
        probe = socket.socket(family, socket.SOCK_STREAM)
        target: str | tuple[str, int] = address
    else:
        host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
        probe, target = socket.socket(socket.AF_INET, socket.SOCK_STREAM), (host, int(port))
    with probe:
        try:
            probe.connect(target)
        except ConnectionRefusedError:
            return True
        except ConnectionResetError:  # accepted by a listener that was closing meanwhile
            return False
    return False


@pytest.mark.timeout(30)  # a proxy thread that never stops hangs the shielded task group
async def test_proxy_stops_when_cancelled_and_its_endpoints_can_be_rebound(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    proxy = EventBusProxy(ctx, frontend=net.bind(Channel.EVENT_BUS_FRONTEND),
                          backend=net.bind(Channel.EVENT_BUS_BACKEND))
    returned = anyio.Event()

    async def run_proxy(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            await proxy.run(task_status=task_status)
        finally:
            returned.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(run_proxy)
            front, back = net.pick(proxy.bound_frontend), net.pick(proxy.bound_backend)
            await _one_event_through(ctx, front, back)
            tg.cancel_scope.cancel()
        assert returned.is_set()

        # The listeners close (asynchronously, in ZMQ's reaper thread): a proxy whose sockets
        # were left open would keep accepting connections until the deadline.
        for endpoint in (front, back):
            while not _refused(endpoint):
                await anyio.sleep(0.02)
        again = EventBusProxy(ctx, frontend=[front], backend=[back])
        async with anyio.create_task_group() as tg:
            await tg.start(again.run)
            assert again.bound_frontend == [front] and again.bound_backend == [back]
            await _one_event_through(ctx, front, back)
            tg.cancel_scope.cancel()


async def test_malformed_event_raises_bad_message_and_the_subscriber_stays_usable(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    proxy = EventBusProxy(ctx, frontend=net.bind(Channel.EVENT_BUS_FRONTEND),
                          backend=net.bind(Channel.EVENT_BUS_BACKEND))
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.run)
        raw = ctx.socket(zmq.PUB)
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(net.pick(proxy.bound_frontend))
        try:
            async with Subscriber(ctx, connect=[net.pick(proxy.bound_backend)],
                                  topics=[b"progress"]) as sub:
                errors: list[BadMessage] = []
                with anyio.fail_after(10):
                    while len(errors) < 4:  # publish until the subscription has propagated
                        await raw.send(b"progress, no payload frame")
                        await raw.send_multipart([b"progress", b"\xc1"])
                        with anyio.move_on_after(0.02):
                            while True:
                                try:
                                    await sub.recv()
                                except BadMessage as exc:
                                    errors.append(exc)
                    assert all(e.channel == "event_bus" for e in errors)
                    assert any("frames" in e.reason for e in errors)
                    await raw.send_multipart([b"progress", msgspec.msgpack.encode(_progress(5))])
                    while True:  # bad events still in flight may come first
                        try:
                            if await sub.recv() == _progress(5):
                                break
                        except BadMessage:
                            pass
        finally:
            raw.close()
        tg.cancel_scope.cancel()
