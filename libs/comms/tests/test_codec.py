"""Undecodable frames raise BadMessage naming the channel and the peer."""

from __future__ import annotations

import anyio
import msgspec
import pytest
import zmq
import zmq.asyncio

from aiperf.comms import BadMessage, Channel, Codec, PullSocket, RouterSocket
from aiperf.messages import (
    Credit,
    CreditReturnChannel,
    CreditUpstream,
    Phase,
    TimePing,
)
from tests._comms_net import Net

pytestmark = pytest.mark.anyio

GARBAGE = b"\xc1 not msgpack"
CREDIT = Credit(phase=Phase.PROFILING, num=1, conversation_id="c", issued_at_ns=0)


def test_codec_names_channel_and_peer() -> None:
    codec: Codec[TimePing] = Codec(CreditUpstream, channel="credits")
    with pytest.raises(BadMessage) as info:
        codec.decode(GARBAGE, peer=b"worker-7")
    assert (info.value.channel, info.value.peer) == ("credits", b"worker-7")
    assert "credits" in str(info.value) and "worker-7" in str(info.value)
    # Valid msgpack of another channel's message is just as bad.
    with pytest.raises(BadMessage):
        codec.decode(msgspec.msgpack.encode(CREDIT), peer=b"worker-7")


async def test_router_raises_bad_message_with_the_senders_identity(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    async with RouterSocket[TimePing](ctx, decode=CreditUpstream, channel="credits",
                                      bind=net.bind(Channel.CREDITS)) as router:
        raw = ctx.socket(zmq.DEALER)
        raw.setsockopt(zmq.LINGER, 0)
        raw.setsockopt(zmq.IDENTITY, b"rogue")
        raw.connect(net.pick(router.bound_endpoints))
        try:
            with anyio.fail_after(5):
                await raw.send(GARBAGE)
                with pytest.raises(BadMessage) as info:
                    await router.recv()
                assert (info.value.channel, info.value.peer) == ("credits", b"rogue")
                # An extra frame is a malformed message too, not a crash of the receive loop.
                await raw.send_multipart([b"x", msgspec.msgpack.encode(
                    TimePing(worker_id="rogue", seq=0, sent_at_ns=0))])
                with pytest.raises(BadMessage) as info:
                    await router.recv()
                assert info.value.peer == b"rogue"
                # The socket stays usable after bad frames.
                ping = TimePing(worker_id="rogue", seq=1, sent_at_ns=0)
                await raw.send(msgspec.msgpack.encode(ping))
                assert await router.recv() == (b"rogue", ping)
        finally:
            raw.close()


async def test_pull_raises_bad_message_naming_its_channel(net: Net,
                                                         ctx: zmq.asyncio.Context) -> None:
    async with PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel,
                                               channel="credit_returns",
                                               bind=net.bind(Channel.CREDIT_RETURNS)) as pull:
        raw = ctx.socket(zmq.PUSH)
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(net.pick(pull.bound_endpoints))
        try:
            with anyio.fail_after(5):
                await raw.send(msgspec.msgpack.encode(CREDIT))  # a Credit is no CreditReturn
                with pytest.raises(BadMessage) as info:
                    await pull.recv()
                assert (info.value.channel, info.value.peer) == ("credit_returns", None)
        finally:
            raw.close()
