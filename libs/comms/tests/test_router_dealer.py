"""ROUTER <-> DEALER over real sockets: identities and addressed replies."""

from __future__ import annotations

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
