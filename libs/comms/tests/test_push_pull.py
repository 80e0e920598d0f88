"""PUSH -> PULL over real sockets: fan-in from several pushers, round robin to several pullers."""

from __future__ import annotations

from collections import Counter

import anyio
import anyio.lowlevel
import pytest
import zmq.asyncio

from aiperf.comms import Channel, PullSocket, PushSocket
from aiperf.messages import CreditReturn, CreditReturnChannel, MetricRecord, Phase
from tests._comms_net import Net

pytestmark = pytest.mark.anyio


async def test_fan_in_from_several_pushers_keeps_each_pushers_order(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    per_pusher = 50
    async with PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel,
                                               channel="credit_returns",
                                               bind=net.bind(Channel.CREDIT_RETURNS)) as pull:
        endpoint = net.pick(pull.bound_endpoints)
        pushers = [PushSocket(ctx, channel="credit_returns", connect=[endpoint], linger_ms=0)
                   for _ in range(3)]
        async with pushers[0], pushers[1], pushers[2]:
            with anyio.fail_after(5):
                for num in range(per_pusher):
                    for i, push in enumerate(pushers):
                        await push.send(CreditReturn(worker_id=f"w{i}", phase=Phase.PROFILING,
                                                     num=num))
                got: dict[str, list[int]] = {f"w{i}": [] for i in range(3)}
                for _ in range(3 * per_pusher):
                    msg = await pull.recv()
                    assert isinstance(msg, CreditReturn)
                    got[msg.worker_id].append(msg.num)
            assert got == {w: list(range(per_pusher)) for w in got}
            with pytest.raises(anyio.WouldBlock):
                pull.recv_nowait()


def _record(num: int) -> MetricRecord:
    return MetricRecord(phase=Phase.PROFILING, credit_num=num, worker_id="w", conversation_id="c")


async def test_push_round_robins_over_several_pullers(net: Net, ctx: zmq.asyncio.Context) -> None:
    rounds = 20
    async with PushSocket(ctx, channel="records", bind=net.bind(Channel.RECORDS),
                          linger_ms=0) as push:
        endpoint = net.pick(push.bound_endpoints)
        pulls = [PullSocket[MetricRecord](ctx, decode=MetricRecord, channel="records",
                                          connect=[endpoint]) for _ in range(3)]
        async with pulls[0], pulls[1], pulls[2]:
            received: list[list[int]] = [[], [], []]
            all_joined, all_real = anyio.Event(), anyio.Event()
            real_total = 0

            async def collect(i: int) -> None:
                nonlocal real_total
                while True:
                    rec = await pulls[i].recv()
                    received[i].append(rec.credit_num)
                    if all(received):
                        all_joined.set()
                    if rec.credit_num >= 0:
                        real_total += 1
                        if real_total == 3 * rounds:
                            all_real.set()

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    for i in range(3):
                        tg.start_soon(collect, i)
                    # Round robin only spans pullers whose connection is complete: probe until
                    # every puller got something, then all three pipes are in the rotation.
                    while not all_joined.is_set():
                        await push.send(_record(-1))
                        with anyio.move_on_after(0.02):
                            await all_joined.wait()
                    for num in range(3 * rounds):
                        await push.send(_record(num))
                    await all_real.wait()
                    tg.cancel_scope.cancel()
            per_puller = [sorted(n for n in nums if n >= 0) for nums in received]
            assert [len(nums) for nums in per_puller] == [rounds] * 3
            # Strict rotation: consecutive messages go to different pullers.
            owner = {n: i for i, nums in enumerate(per_puller) for n in nums}
            assert Counter(owner[n] for n in range(3)) == Counter({0: 1, 1: 1, 2: 1})
            assert all(owner[n] == owner[n + 3] for n in range(3 * rounds - 3))


async def test_sends_keep_their_call_order_when_some_wait_at_the_high_water_mark(ctx: zmq.asyncio.Context) -> None:
    # Senders that find the socket ready send at once, without zmq.asyncio; once one waits at
    # the high-water mark, later ones must queue behind it even when the reader has made room.
    count = 300
    async with PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel, channel="credit_returns",
                                               bind=["inproc://order"], hwm=4) as pull, \
            PushSocket(ctx, channel="credit_returns", connect=["inproc://order"], hwm=4, linger_ms=0) as push:
        got: list[int] = []

        async def read() -> None:
            while len(got) < count:
                message = await pull.recv()
                assert isinstance(message, CreditReturn)
                got.append(message.num)
                await anyio.lowlevel.checkpoint()  # senders run between reads

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                for num in range(count):  # tasks start in this order
                    tg.start_soon(push.send, CreditReturn(worker_id="w", phase=Phase.PROFILING, num=num))
                    if num % 7 == 0:
                        await anyio.lowlevel.checkpoint()  # some sends come while others wait
    assert got == list(range(count))
