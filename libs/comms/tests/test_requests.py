"""PendingReplies: every way out of `ask` removes its entry; a reply over real sockets."""

from __future__ import annotations

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import AskTimeout, Channel, DealerSocket, PendingReplies, RouterSocket
from aiperf.messages import CreditsLost, Reply, ToController, ToService, WorkerLost
from tests._comms_net import Net

pytestmark = pytest.mark.anyio


async def _never_answered() -> None:
    pass


async def test_reply_over_router_and_dealer_is_delivered_to_the_asker(
        net: Net, ctx: zmq.asyncio.Context) -> None:
    pending: PendingReplies[Reply] = PendingReplies()
    async with (RouterSocket[ToController](ctx, decode=ToController, channel="control",
                                           bind=net.bind(Channel.CONTROL)) as controller,
                DealerSocket[ToService](ctx, identity="svc-1", decode=ToService, channel="control",
                                        connect=[net.pick(controller.bound_endpoints)]) as svc):

        async def service() -> None:
            command = await svc.recv()
            assert isinstance(command, WorkerLost)
            await svc.send(CreditsLost(request_id=command.request_id, service_id=svc.identity,
                                       lost=len(command.worker_id)))

        async def dispatch_replies() -> None:
            while True:
                _peer, reply = await controller.recv()
                assert isinstance(reply, Reply)
                pending.resolve(reply.request_id, reply)

        with anyio.fail_after(5):
            # The ROUTER can only address the service once it connected: let it say hello.
            await svc.send(CreditsLost(request_id="hello", service_id="svc-1", lost=0))
            assert (await controller.recv())[0] == b"svc-1"
            async with anyio.create_task_group() as tg:
                tg.start_soon(service)
                tg.start_soon(dispatch_replies)
                command = WorkerLost(request_id="r1", worker_id="w-12345")
                reply = await pending.ask("r1", lambda: controller.send(b"svc-1", command),
                                          target="svc-1", timeout=5)
                assert len(pending) == 0
                tg.cancel_scope.cancel()
    assert reply == CreditsLost(request_id="r1", service_id="svc-1", lost=7)


async def test_timeout_raises_ask_timeout_and_a_late_reply_is_refused() -> None:
    pending: PendingReplies[str] = PendingReplies()
    with anyio.fail_after(5), pytest.raises(AskTimeout) as info:
        await pending.ask("r1", _never_answered, target="svc-1", timeout=0.05)
    assert (info.value.target, info.value.request_id, info.value.timeout) == ("svc-1", "r1", 0.05)
    assert len(pending) == 0
    assert pending.resolve("r1", "late") is False


async def test_failed_send_propagates_and_leaves_nothing_pending() -> None:
    pending: PendingReplies[str] = PendingReplies()

    async def broken_send() -> None:
        raise ConnectionError("socket gone")

    with pytest.raises(ConnectionError, match="socket gone"):
        await pending.ask("r1", broken_send, target="svc-1", timeout=5)
    assert len(pending) == 0


async def test_cancelled_ask_leaves_nothing_pending() -> None:
    pending: PendingReplies[str] = PendingReplies()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: pending.ask("r1", _never_answered, target="svc-1", timeout=60))
            await anyio.wait_all_tasks_blocked()
            assert len(pending) == 1
            tg.cancel_scope.cancel()
    assert len(pending) == 0
    assert pending.resolve("r1", "late") is False


async def test_resolve_answers_only_the_waiting_asker_once() -> None:
    pending: PendingReplies[str] = PendingReplies()
    got: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                got.append(await pending.ask("r1", _never_answered, target="svc-1", timeout=60))

            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            assert pending.resolve("unknown", "x") is False
            with pytest.raises(ValueError, match="already pending"):
                await pending.ask("r1", _never_answered, target="svc-1", timeout=60)
            assert pending.resolve("r1", "first") is True
            assert pending.resolve("r1", "second") is False
    assert got == ["first"]
    assert len(pending) == 0
