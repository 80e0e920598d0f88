"""ROUTER_MANDATORY over real sockets: targeted sends to departed peers raise, broadcasts skip."""

from __future__ import annotations

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import Channel, DealerSocket, PeerUnreachable, RouterSocket
from aiperf.messages import CreditChannel, CreditUpstream, TimePing, TimePong
from tests._comms_net import Net

pytestmark = pytest.mark.anyio


def _pong(seq: int) -> TimePong:
    return TimePong(seq=seq, ping_sent_at_ns=0, received_at_ns=0)


async def test_send_to_never_connected_peer_raises_at_once(net: Net,
                                                           ctx: zmq.asyncio.Context) -> None:
    async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits",
                                      bind=net.bind(Channel.CREDITS)) as router:
        with pytest.raises(PeerUnreachable) as info:
            await router.send(b"nobody", _pong(0))
        assert (info.value.peer, info.value.channel) == (b"nobody", "credits")


async def test_departed_peer_raises_on_send_and_is_skipped_by_broadcast(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits",
                                      bind=net.bind(Channel.CREDITS)) as router:
        endpoint = net.pick(router.bound_endpoints)
        live = DealerSocket[CreditChannel](ctx, identity="live", decode=CreditChannel,
                                           channel="credits", connect=[endpoint])
        gone = DealerSocket[CreditChannel](ctx, identity="gone", decode=CreditChannel,
                                           channel="credits", connect=[endpoint])
        async with live:
            with anyio.fail_after(5):
                async with gone:
                    for dealer in (live, gone):
                        await dealer.send(TimePing(worker_id=dealer.identity, seq=0, sent_at_ns=0))
                    peers = {(await router.recv())[0] for _ in range(2)}
                    assert peers == {b"live", b"gone"}
                    await router.send(b"gone", _pong(1))
                    assert await gone.recv() == _pong(1)

                # The ROUTER learns of the disconnect asynchronously; until then sends to the
                # departed peer are silently dropped. Retry until it knows.
                attempts = 0
                while True:
                    attempts += 1
                    try:
                        await router.send(b"gone", _pong(2))
                    except PeerUnreachable as exc:
                        assert exc.peer == b"gone"
                        break
                    await anyio.sleep(0.01)

                skipped = await router.broadcast([b"live", b"gone"], _pong(3))
                assert skipped == [b"gone"]
                assert await live.recv() == _pong(3)
