"""The return-channel readiness probe over real PUSH(IMMEDIATE=1) -> PULL sockets."""

from __future__ import annotations

import socket

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import Channel, PullSocket, PushSocket, probe_return_channel
from aiperf.messages import CreditReturnChannel, WorkerConnected
from tests._comms_net import Net

pytestmark = pytest.mark.anyio

HELLO = WorkerConnected(worker_id="w0")


class RecordingLog:
    """Stands in for a structlog logger: records (event, keywords) of each warning."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, object]]] = []

    def warning(self, event: str, **kw: object) -> None:
        self.warnings.append((event, kw))


def _unbound_endpoint(net: Net) -> str:
    """An endpoint of this transport where nothing listens (yet)."""
    if net.transport == "ipc":
        return net.addressing.ipc(Channel.CREDIT_RETURNS)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


async def test_probe_fails_while_no_pull_is_bound_and_degrades_open_with_a_warning(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    log = RecordingLog()
    async with PushSocket(ctx, channel="credit_returns", connect=[_unbound_endpoint(net)],
                          immediate=True, linger_ms=0) as push:
        with anyio.fail_after(5):
            assert await probe_return_channel(push, HELLO, attempts=5, interval_s=0.01,
                                              log=log) is False
            assert await probe_return_channel(push, HELLO, attempts=1, interval_s=0.01) is False
    assert log.warnings == [("comms.return_channel_unconfirmed",
                             {"channel": "credit_returns", "attempts": 5, "waited_s": 0.05})]


async def test_probe_succeeds_once_the_pull_binds_and_the_hello_arrives(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    endpoint = _unbound_endpoint(net)
    log = RecordingLog()
    result: list[bool] = []
    async with PushSocket(ctx, channel="credit_returns", connect=[endpoint], immediate=True,
                          linger_ms=0) as push:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def probe() -> None:
                    result.append(await probe_return_channel(push, HELLO, attempts=1000,
                                                             interval_s=0.005, log=log))

                tg.start_soon(probe)
                await anyio.wait_all_tasks_blocked()  # the probe has failed and waits to retry
                assert result == []
                async with PullSocket[CreditReturnChannel](
                        ctx, decode=CreditReturnChannel, channel="credit_returns",
                        bind=[endpoint]) as pull:
                    assert await pull.recv() == HELLO
            assert result == [True]
            assert log.warnings == []

