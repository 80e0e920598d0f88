"""PUB -> EventBusProxy (XSUB/XPUB) -> SUB over real sockets, and the proxy's shutdown."""

from __future__ import annotations

import os
from collections.abc import Sequence

import anyio
import pytest
import zmq
import zmq.asyncio
from _comms_net import Net

from aiperf.comms import Channel, EventBusProxy, Publisher, Subscriber
from aiperf.messages import Event, Phase, PhaseStarted, Progress

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


async def _rebind(ctx: zmq.asyncio.Context, frontend: Sequence[str],
                  backend: Sequence[str]) -> EventBusProxy:
    # Closing a ZMQ socket is asynchronous (the reaper thread closes the listener), so the
    # old TCP port may be busy for a moment; a socket that was never closed stays busy.
    while True:
        proxy = EventBusProxy(ctx, frontend=frontend, backend=backend)
        try:
            proxy._open()[0].close()  # probe: bind everything, then give it back at once
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE:
                raise
            await anyio.sleep(0.02)
            continue
        return proxy


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

        # The listeners are gone: the IPC files are removed and the TCP ports are free again.
        if net.transport == "ipc":
            for endpoint in (front, back):
                while os.path.exists(endpoint.removeprefix("ipc://")):
                    await anyio.sleep(0.02)
        again = await _rebind(ctx, [front], [back])
        async with anyio.create_task_group() as tg:
            await tg.start(again.run)
            assert again.bound_frontend == [front] and again.bound_backend == [back]
            await _one_event_through(ctx, front, back)
            tg.cancel_scope.cancel()
