"""CURVE over real sockets (ipc and tcp): the run's peers talk, anyone else is refused."""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import zmq
import zmq.asyncio
from zmq.utils.monitor import recv_monitor_message

from aiperf.comms import (
    Channel,
    CurveKeys,
    DealerSocket,
    EventBusProxy,
    Publisher,
    PullSocket,
    PushSocket,
    RouterSocket,
    Subscriber,
    load_curve,
    zmq_context,
)
from aiperf.messages import (
    CreditReturn,
    CreditReturnChannel,
    Phase,
    PhaseComplete,
    TimePing,
    TimePong,
)
from tests._comms_net import Net

pytestmark = pytest.mark.anyio

KEYS = CurveKeys.generate()


@pytest.fixture
def secure() -> Iterator[zmq.asyncio.Context]:
    with zmq_context(KEYS) as ctx:
        yield ctx


def test_installed_libzmq_has_curve() -> None:
    assert zmq.has("curve")


def test_keys_round_trip_through_owner_only_files(tmp_path: Path) -> None:
    KEYS.write(tmp_path / "keys")
    assert CurveKeys.load(tmp_path / "keys") == KEYS
    assert load_curve(str(tmp_path / "keys")) == KEYS
    assert load_curve(None) is None
    for name in ("server.key", "client.key"):
        assert stat.S_IMODE((tmp_path / "keys" / name).stat().st_mode) == 0o600
    assert KEYS.server_secret.decode() not in repr(KEYS)
    assert KEYS.client_secret.decode() not in repr(KEYS)


def test_http_tokens_are_per_run_and_per_purpose(tmp_path: Path) -> None:
    KEYS.write(tmp_path / "keys")
    token = KEYS.http_token("raw-upload")
    assert CurveKeys.load(tmp_path / "keys").http_token("raw-upload") == token  # every container agrees
    assert len(token) == 64 and token != KEYS.http_token("other")
    assert CurveKeys.generate().http_token("raw-upload") != token  # another run cannot derive it
    assert KEYS.server_secret.decode() not in token


def test_missing_key_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="server.key"):
        CurveKeys.load(tmp_path)


async def test_peers_with_the_run_keys_talk(net: Net, secure: zmq.asyncio.Context) -> None:
    async with RouterSocket[TimePing](secure, decode=TimePing, channel="credits",
                                      bind=net.bind(Channel.CREDITS)) as router:
        async with DealerSocket[TimePong](secure, identity="w0", decode=TimePong, channel="credits",
                                          connect=[net.pick(router.bound_endpoints)]) as dealer:
            with anyio.fail_after(5):
                await dealer.send(TimePing(worker_id="w0", seq=1, sent_at_ns=1))
                peer, ping = await router.recv()
                assert (peer, ping.seq) == (b"w0", 1)
                await router.send(peer, TimePong(seq=1, ping_sent_at_ns=1, received_at_ns=2))
                assert (await dealer.recv()).received_at_ns == 2


async def test_event_bus_proxy_carries_events_under_curve(net: Net,
                                                          secure: zmq.asyncio.Context) -> None:
    proxy = EventBusProxy(secure, frontend=net.bind(Channel.EVENT_BUS_FRONTEND),
                          backend=net.bind(Channel.EVENT_BUS_BACKEND))
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.run)
        async with (Subscriber(secure, connect=[net.pick(proxy.bound_backend)]) as sub,
                    Publisher(secure, connect=[net.pick(proxy.bound_frontend)]) as pub):
            with anyio.fail_after(5):
                while True:  # a SUB joins asynchronously: publish until one arrives
                    await pub.publish(PhaseComplete(phase=Phase.PROFILING, issued=3, returned=3))
                    with anyio.move_on_after(0.05):
                        got = await sub.recv()
                        break
            assert isinstance(got, PhaseComplete)
        tg.cancel_scope.cancel()


async def _handshake_failure(sock: zmq.asyncio.Socket, endpoint: str) -> int:
    """Connect `sock` and return the first handshake-failure event its monitor reports."""
    failures = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    monitor = sock.get_monitor_socket(failures | zmq.EVENT_HANDSHAKE_SUCCEEDED)
    try:
        sock.connect(endpoint)
        event = await recv_monitor_message(monitor)
        return int(event["event"])
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)


def _intruder(ctx: zmq.asyncio.Context, client: CurveKeys | None) -> zmq.asyncio.Socket:
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    if client is not None:  # a CURVE client that knows the server key but not the run's client key
        push.setsockopt(zmq.CURVE_SECRETKEY, client.client_secret)
        push.setsockopt(zmq.CURVE_PUBLICKEY, client.client_public)
        push.setsockopt(zmq.CURVE_SERVERKEY, KEYS.server_public)
    return push


@pytest.mark.parametrize("intruder_keys", [None, CurveKeys.generate()], ids=["plain", "other-key"])
async def test_a_peer_without_the_run_client_key_is_refused(
        net: Net, secure: zmq.asyncio.Context, ctx: zmq.asyncio.Context,
        intruder_keys: CurveKeys | None) -> None:
    async with PullSocket[CreditReturnChannel](secure, decode=CreditReturnChannel,
                                               channel="credit_returns",
                                               bind=net.bind(Channel.CREDIT_RETURNS)) as pull:
        endpoint = net.pick(pull.bound_endpoints)
        intruder = _intruder(ctx, intruder_keys)
        try:
            with anyio.fail_after(5):
                event = await _handshake_failure(intruder, endpoint)
            assert event != zmq.EVENT_HANDSHAKE_SUCCEEDED
            if intruder_keys is not None:
                assert event == zmq.EVENT_HANDSHAKE_FAILED_AUTH  # refused by our ZAP handler
            forged = CreditReturn(worker_id="forged", phase=Phase.PROFILING, num=666)
            # Queued on the intruder's side (its pipe never completes a handshake) or refused
            # there outright (no pipe between reconnects): either way it must never arrive.
            with contextlib.suppress(zmq.Again):
                await intruder.send(pull.codec.encode(forged), flags=zmq.NOBLOCK)
            async with PushSocket(secure, channel="credit_returns", connect=[endpoint],
                                  linger_ms=0) as honest:
                with anyio.fail_after(5):
                    await honest.send(CreditReturn(worker_id="w0", phase=Phase.PROFILING, num=1))
                    got = await pull.recv()
            assert isinstance(got, CreditReturn) and got.worker_id == "w0"
            with pytest.raises(anyio.WouldBlock):
                pull.recv_nowait()
        finally:
            intruder.close(linger=0)


async def test_a_plain_server_refuses_a_curve_client(net: Net, secure: zmq.asyncio.Context,
                                                     ctx: zmq.asyncio.Context) -> None:
    """Mixed configuration fails closed both ways: a CURVE client never talks to a plain server."""
    async with PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel,
                                               channel="credit_returns",
                                               bind=net.bind(Channel.CREDIT_RETURNS)) as pull:
        client = secure.socket(zmq.PUSH)
        client.setsockopt(zmq.LINGER, 0)
        client.setsockopt(zmq.CURVE_SECRETKEY, KEYS.client_secret)
        client.setsockopt(zmq.CURVE_PUBLICKEY, KEYS.client_public)
        client.setsockopt(zmq.CURVE_SERVERKEY, KEYS.server_public)
        try:
            with anyio.fail_after(5):
                event = await _handshake_failure(client, net.pick(pull.bound_endpoints))
            assert event != zmq.EVENT_HANDSHAKE_SUCCEEDED
        finally:
            client.close(linger=0)
