"""Async-context-managed ZMQ sockets, one typed codec each.

Every socket option is set before the first bind/connect. Each wrapper closes its socket on
every exit path. The ZMQ context is created by the caller (`main.py`) and passed in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, cast

import anyio
import zmq
import zmq.asyncio

from aiperf.comms.codec import BadMessage, Codec
from aiperf.comms.curve import apply_curve, curve_of

In = TypeVar("In")

DEFAULT_HWM = 100_000
"""High-water mark of data sockets: deep enough never to drop or block in a normal run."""
RAW_RECORDS_HWM = 1_000
"""High-water mark of each end of a `raw_records` connection (worker PUSH, record-processor
PULL; ZMQ counts it per connection). A raw record carries the response's bytes (~12 KB for a
64-token stream), so with `DEFAULT_HWM` a record-processor that falls behind queued up to
100,000 of them per worker (~1.2 GB) in its own memory, growing with the run. With this mark
a connection holds at most ~2,000 (0.4-1 s of a record-processor's work: its stalls, such
as building tiktoken's encoding, pass without effect); beyond that the worker's push waits,
and since a worker returns a credit only after pushing its record, the run slows to what the
record-processors can take instead of queueing. No record is dropped (PUSH never drops)."""

_NOBLOCK = int(zmq.NOBLOCK)  # plain ints: pyzmq's flag enums cost more than the send itself
_MORE_NOBLOCK = int(zmq.SNDMORE | zmq.NOBLOCK)


class PeerUnreachable(Exception):
    """A targeted send named a peer the ROUTER does not know (departed or never connected)."""

    def __init__(self, peer: bytes, channel: str) -> None:
        self.peer, self.channel = peer, channel
        super().__init__(f"peer {peer.decode(errors='replace')!r} unreachable on {channel}")


class ZmqSocket:
    """Shared lifecycle of one ZMQ socket: create, set options, bind/connect, close (what every
    wrapper of this module and of `aiperf.comms.pubsub` holds)."""

    def __init__(self, ctx: zmq.asyncio.Context, kind: int, *, channel: str,
                 options: dict[int, int | bytes], bind: Sequence[str] = (),
                 connect: Sequence[str] = (), linger_ms: int = 0) -> None:
        self.channel = channel
        self._ctx, self._kind, self._options = ctx, kind, dict(options)
        self._bind, self._connect = list(bind), list(connect)
        self._options.setdefault(zmq.LINGER, linger_ms)
        self._sock: zmq.asyncio.Socket | None = None
        self._sync: zmq.Socket[bytes] | None = None
        self._waiting_sends = self._waiting = 0  # sends / all operations waiting in zmq.asyncio
        self._rearm_pending = False
        self.bound: list[str] = []

    def open(self) -> zmq.asyncio.Socket:
        """Create the socket, set every option, then bind and connect. Idempotent."""
        if self._sock is not None:
            return self._sock
        sock = self._ctx.socket(self._kind)
        try:
            for option, value in self._options.items():
                sock.setsockopt(option, value)
            apply_curve(sock, curve_of(self._ctx), bind=self._bind, connect=self._connect)
            for endpoint in self._bind:
                sock.bind(endpoint)
                self.bound.append(sock.getsockopt_string(zmq.LAST_ENDPOINT))
            for endpoint in self._connect:
                sock.connect(endpoint)
        except BaseException:
            sock.close(linger=0)
            raise
        self._sock = sock
        # zmq.asyncio reports NOBLOCK failures through a future; a shadow socket raises them.
        self._sync = zmq.Socket.shadow(sock.underlying)
        return sock

    def close(self) -> None:
        """Close the socket (its LINGER decides how long unsent messages may take)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = self._sync = None

    @property
    def sock(self) -> zmq.asyncio.Socket:
        if self._sock is None:
            raise RuntimeError(f"{self.channel} socket used outside its context")
        return self._sock

    @property
    def sync(self) -> zmq.Socket[bytes]:
        """A blocking view of the same socket, for NOBLOCK calls that must raise at once."""
        if self._sync is None:
            raise RuntimeError(f"{self.channel} socket used outside its context")
        return self._sync

    # The hot path. zmq.asyncio answers a send or receive that can complete at once with a
    # future it has already resolved (no loop round trip either), but builds it through ~30
    # Python calls and flag enums; these try the NOBLOCK call on the shadow socket first and
    # fall back to zmq.asyncio only to wait. The same semantics: neither yields to the loop when
    # the socket is ready (as an already resolved future does not), and a send that finds a
    # send waiting (high-water mark) queues behind it, so messages keep their order.
    #
    # libzmq's descriptor is edge-triggered: any call on the socket may take in the event that
    # would have woken an operation waiting in zmq.asyncio (a receive waiting while another task
    # sends). After a call of ours while one waits, zmq.asyncio is asked to look at the socket's
    # events again (`_schedule_remaining_events`, what it does after its own calls).

    def send_now(self, frames: tuple[bytes, ...]) -> bool:
        """Send one message of `frames` if the socket takes it at once (and no send waits)."""
        if self._waiting_sends:
            return False
        sync = self.sync
        try:
            for frame in frames[:-1]:  # a message goes whole or not at all: only its first
                sync.send(frame, _MORE_NOBLOCK)  # frame can raise Again
            sync.send(frames[-1], _NOBLOCK)
        except zmq.Again:
            return False
        finally:
            if self._waiting:
                self._rearm()
        return True

    async def send(self, frames: tuple[bytes, ...]) -> None:
        """Send one message of `frames`; waits while the socket cannot take it."""
        if self.send_now(frames):
            return
        self._waiting_sends += 1
        self._waiting += 1
        try:
            await self.sock.send_multipart(frames)
        finally:
            self._waiting_sends -= 1
            self._waiting -= 1

    def recv_now(self) -> bytes | None:
        """The next single-frame message if one is queued, else None."""
        try:
            return self.sync.recv(_NOBLOCK)
        except zmq.Again:
            return None
        finally:
            if self._waiting:
                self._rearm()

    async def recv(self) -> bytes:
        """The next single-frame message."""
        if (message := self.recv_now()) is not None:
            return message
        self._waiting += 1
        try:
            return await self.sock.recv()
        finally:
            self._waiting -= 1

    async def recv_frames(self) -> list[bytes]:
        """The next message, every frame."""
        try:
            return self.sync.recv_multipart(_NOBLOCK)
        except zmq.Again:
            pass
        finally:
            if self._waiting:
                self._rearm()
        self._waiting += 1
        try:
            return await self.sock.recv_multipart()
        finally:
            self._waiting -= 1

    def _rearm(self) -> None:
        """Have zmq.asyncio look at the events once this loop turn is over (once per turn, however
        many calls took place in it: the waiting operation can only be woken by the loop)."""
        if not self._rearm_pending:
            self._rearm_pending = True
            asyncio.get_running_loop().call_soon(self._rearm_now)

    def _rearm_now(self) -> None:
        self._rearm_pending = False
        if self._sock is not None and self._waiting:
            cast("Callable[[], None]", self._sock._schedule_remaining_events)()  # pyzmq's own hook


class ManagedSocket:
    """Async context manager support for the socket wrappers (here and `aiperf.comms.pubsub`):
    entering opens their `ZmqSocket`, leaving closes it."""

    _s: ZmqSocket

    async def __aenter__(self) -> Self:
        self._s.open()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._s.close()

    @property
    def bound_endpoints(self) -> list[str]:
        """Actual endpoints bound (a TCP wildcard shows its chosen port)."""
        return list(self._s.bound)


class RouterSocket(ManagedSocket, Generic[In]):
    """ROUTER with `ROUTER_MANDATORY`: a targeted send to an unknown peer raises
    `PeerUnreachable`; `broadcast` skips such peers and reports them.
    Frames: [peer identity, payload]."""

    def __init__(self, ctx: zmq.asyncio.Context, *, decode: Any, channel: str,
                 bind: Sequence[str], hwm: int = DEFAULT_HWM) -> None:
        self.codec: Codec[In] = Codec(decode, channel=channel)
        self._s = ZmqSocket(ctx, zmq.ROUTER, channel=channel, bind=bind, options={
            zmq.ROUTER_MANDATORY: 1, zmq.SNDHWM: hwm, zmq.RCVHWM: hwm})

    async def send(self, peer: bytes, message: object) -> None:
        """Send to one peer; raises `PeerUnreachable` if it is not connected."""
        await self.send_raw(peer, self.codec.encode(message))

    async def send_raw(self, peer: bytes, payload: bytes) -> None:
        """Send already-encoded bytes to one peer (for fan-out of one encoding)."""
        try:
            await self._s.send((peer, payload))
        except zmq.ZMQError as exc:
            raise self._unreachable(exc, peer) from exc

    def send_nowait(self, peer: bytes, message: object) -> None:
        """`send` when the socket takes the message at once, else raise `anyio.WouldBlock`
        (nothing sent; the peer's queue is at its high-water mark)."""
        try:
            sent = self._s.send_now((peer, self.codec.encode(message)))
        except zmq.ZMQError as exc:
            raise self._unreachable(exc, peer) from exc
        if not sent:
            raise anyio.WouldBlock

    def _unreachable(self, exc: zmq.ZMQError, peer: bytes) -> Exception:
        return PeerUnreachable(peer, self._s.channel) if exc.errno == zmq.EHOSTUNREACH else exc

    async def broadcast(self, peers: Iterable[bytes], message: object) -> list[bytes]:
        """Send to every peer, skipping unreachable ones; returns the peers skipped."""
        payload, skipped = self.codec.encode(message), []
        for peer in peers:
            try:
                await self.send_raw(peer, payload)
            except PeerUnreachable:
                skipped.append(peer)
        return skipped

    async def recv(self) -> tuple[bytes, In]:
        """Next (peer identity, message); raises `BadMessage` for undecodable frames or a
        message of more than one payload frame (the socket stays usable)."""
        frames = await self._s.recv_frames()
        if len(frames) != 2:
            raise BadMessage(peer=frames[0], channel=self._s.channel,
                             reason=f"expected 1 payload frame, got {len(frames) - 1}")
        peer, payload = frames
        return peer, self.codec.decode(payload, peer=peer)


class DealerSocket(ManagedSocket, Generic[In]):
    """DEALER with a fixed identity (the service id), so the ROUTER side can address it."""

    def __init__(self, ctx: zmq.asyncio.Context, *, identity: str, decode: Any, channel: str,
                 connect: Sequence[str], hwm: int = DEFAULT_HWM, linger_ms: int = 0) -> None:
        self.identity = identity
        self.codec: Codec[In] = Codec(decode, channel=channel)
        self._s = ZmqSocket(ctx, zmq.DEALER, channel=channel, connect=connect, linger_ms=linger_ms,
                          options={zmq.IDENTITY: identity.encode(), zmq.SNDHWM: hwm,
                                   zmq.RCVHWM: hwm})

    async def send(self, message: object) -> None:
        """Queue one message to the ROUTER (blocks only at the high-water mark)."""
        await self._s.send((self.codec.encode(message),))

    async def recv(self) -> In:
        """Next message from the ROUTER."""
        return self.codec.decode(await self._s.recv())


class PushSocket(ManagedSocket):
    """PUSH, binding or connecting. With `immediate=True` (IMMEDIATE=1) nothing is queued
    for peers whose connection is not complete, so `send_nowait` raises `anyio.WouldBlock`
    until the PULL side exists: the basis of the return-channel readiness probe."""

    def __init__(self, ctx: zmq.asyncio.Context, *, channel: str, bind: Sequence[str] = (),
                 connect: Sequence[str] = (), immediate: bool = False, hwm: int = DEFAULT_HWM,
                 linger_ms: int = 5_000) -> None:
        self.codec: Codec[object] = Codec(object, channel=channel)
        self._s = ZmqSocket(ctx, zmq.PUSH, channel=channel, bind=bind, connect=connect,
                          linger_ms=linger_ms,
                          options={zmq.SNDHWM: hwm, zmq.IMMEDIATE: int(immediate)})

    async def send(self, message: object) -> None:
        """Queue one message; waits while no peer can take it."""
        await self._s.send((self.codec.encode(message),))

    def send_nowait(self, message: object) -> None:
        """Queue one message now or raise `anyio.WouldBlock`."""
        if not self._s.send_now((self.codec.encode(message),)):
            raise anyio.WouldBlock


class PullSocket(ManagedSocket, Generic[In]):
    """PULL, binding or connecting; fair-queues from every PUSH peer."""

    def __init__(self, ctx: zmq.asyncio.Context, *, decode: Any, channel: str,
                 bind: Sequence[str] = (), connect: Sequence[str] = (),
                 hwm: int = DEFAULT_HWM) -> None:
        self.codec: Codec[In] = Codec(decode, channel=channel)
        self._s = ZmqSocket(ctx, zmq.PULL, channel=channel, bind=bind, connect=connect,
                          options={zmq.RCVHWM: hwm})

    async def recv(self) -> In:
        """Next message from any PUSH peer."""
        return self.codec.decode(await self._s.recv())

    def recv_nowait(self) -> In:
        """Next message if one is queued, else raise `anyio.WouldBlock`."""
        if (payload := self._s.recv_now()) is None:
            raise anyio.WouldBlock
        return self.codec.decode(payload)
