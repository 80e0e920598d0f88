"""ROUTER <-> DEALER over real sockets: identities and addressed replies."""

from __future__ import annotations

import time

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import Channel, DealerSocket, RouterSocket
from aiperf.messages import CreditChannel, CreditUpstream, TimePing, TimePong
from tests._comms_net import Net

pytestmark = pytest.mark.anyio

WORKERS = ["worker-0", "worker-1", "worker-2"]


async def test_router_sees_identities_and_replies_reach_the_right_dealer(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits",
                                      bind=net.bind(Channel.CREDITS)) as router:
        endpoint = net.pick(router.bound_endpoints)
        dealers = [DealerSocket[CreditChannel](ctx, identity=w, decode=CreditChannel,
                                               channel="credits", connect=[endpoint])
                   for w in WORKERS]
        async with dealers[0], dealers[1], dealers[2]:
            with anyio.fail_after(5):
                for seq, dealer in enumerate(dealers):
                    await dealer.send(TimePing(worker_id=dealer.identity, seq=seq, sent_at_ns=0))
                seen: dict[bytes, int] = {}
                for _ in WORKERS:
                    peer, ping = await router.recv()
                    seen[peer] = ping.seq
                    assert peer == ping.worker_id.encode()
                assert sorted(seen) == [w.encode() for w in WORKERS]

                # Answer in reverse order, each with a value only its own dealer should get.
                for peer, seq in sorted(seen.items(), reverse=True):
                    await router.send(peer, TimePong(seq=seq, ping_sent_at_ns=0,
                                                     received_at_ns=1000 + seq))
                for seq, dealer in enumerate(dealers):
                    assert await dealer.recv() == TimePong(seq=seq, ping_sent_at_ns=0,
                                                           received_at_ns=1000 + seq)


async def test_a_receive_waiting_is_woken_though_a_send_on_its_socket_took_in_the_arrival(
        ctx: zmq.asyncio.Context) -> None:
    # libzmq's descriptor is edge-triggered: a send on the socket, done without zmq.asyncio,
    # can take in the event that should wake the task waiting to receive on it (a worker's
    # credits DEALER: one task receives while another sends its clock pings).
    async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits",
                                      bind=["inproc://wake"]) as router, \
            DealerSocket[CreditChannel](ctx, identity="w", decode=CreditChannel, channel="credits",
                                        connect=["inproc://wake"]) as dealer:
        with anyio.fail_after(5):
            await dealer.send(TimePing(worker_id="w", seq=0, sent_at_ns=0))
            await router.recv()  # the router knows the dealer now
        got: list[object] = []
        received = anyio.Event()
        async with anyio.create_task_group() as tg:
            async def receive() -> None:
                got.append(await dealer.recv())
                received.set()

            tg.start_soon(receive)
            await anyio.wait_all_tasks_blocked()  # the receive waits in zmq.asyncio
            # No await that yields between these two: the pong reaches the dealer's queue,
            # then the dealer's own send takes in its arrival before the loop polls again.
            await router.send(b"w", TimePong(seq=1, ping_sent_at_ns=0, received_at_ns=1))
            time.sleep(0.01)  # libzmq takes in pending events on a send at most every ~1 ms
            await dealer.send(TimePing(worker_id="w", seq=2, sent_at_ns=0))
            with anyio.fail_after(2):
                await received.wait()
        assert got == [TimePong(seq=1, ping_sent_at_ns=0, received_at_ns=1)]
