"""The event bus: PUB -> XSUB/XPUB proxy -> SUB. Frames: [topic, payload].

Broadcasts are best effort (a subscriber that joins late misses earlier events).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import anyio
import zmq
import zmq.asyncio
from anyio.abc import TaskStatus

from aiperf.comms.codec import BadMessage, Codec
from aiperf.comms.curve import apply_curve, curve_of
from aiperf.comms.sockets import DEFAULT_HWM, ManagedSocket, ZmqSocket
from aiperf.messages import Event, topic_of


class Publisher(ManagedSocket):
    """PUB connected to the proxy's frontend (XSUB)."""

    def __init__(self, ctx: zmq.asyncio.Context, *, connect: Sequence[str],
                 hwm: int = DEFAULT_HWM) -> None:
        self.codec: Codec[Event] = Codec(Event, channel="event_bus")
        self._s = ZmqSocket(ctx, zmq.PUB, channel="event_bus", connect=connect, linger_ms=1_000,
                          options={zmq.SNDHWM: hwm})

    async def publish(self, event: Event) -> None:
        """Broadcast `event` under its topic (its tag)."""
        await self._s.send((topic_of(event), self.codec.encode(event)))

    def drop_unsent(self) -> None:
        """Closing will not wait for broadcasts still queued (the LINGER of 1 s otherwise):
        for when the proxy is known to be gone and nothing could receive them."""
        self._s.sock.setsockopt(zmq.LINGER, 0)


class Subscriber(ManagedSocket):
    """SUB connected to the proxy's backend (XPUB), subscribed to `topics` (empty: all)."""

    def __init__(self, ctx: zmq.asyncio.Context, *, connect: Sequence[str],
                 topics: Sequence[bytes] = (b"",), hwm: int = DEFAULT_HWM) -> None:
        self.codec: Codec[Event] = Codec(Event, channel="event_bus")
        options: dict[int, int | bytes] = {zmq.RCVHWM: hwm}
        self._s = ZmqSocket(ctx, zmq.SUB, channel="event_bus", connect=connect, options=options)
        self._topics = list(topics)

    async def __aenter__(self) -> Subscriber:
        sock = self._s.open()
        for topic in self._topics:
            sock.setsockopt(zmq.SUBSCRIBE, topic)
        return self

    async def recv(self) -> Event:
        """Next event of a subscribed topic; raises `BadMessage` for an undecodable event or
        one not framed as [topic, payload] (the socket stays usable)."""
        frames = await self._s.recv_frames()
        if len(frames) != 2:
            raise BadMessage(peer=None, channel=self._s.channel,
                             reason=f"expected [topic, payload], got {len(frames)} frames")
        return self.codec.decode(frames[1])


class EventBusProxy:
    """XSUB (frontend, publishers connect) <-> XPUB (backend, subscribers connect).

    Runs `zmq.proxy_steerable` in a worker thread and stops it through its control socket
    (TERMINATE) when the calling task is cancelled; the thread is never abandoned.
    """

    def __init__(self, ctx: zmq.asyncio.Context, *, frontend: Sequence[str],
                 backend: Sequence[str], hwm: int = DEFAULT_HWM) -> None:
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.shadow(ctx.underlying)
        self._curve = curve_of(ctx)  # the shadow does not carry the keys
        self._frontend, self._backend, self._hwm = list(frontend), list(backend), hwm
        self._control = f"inproc://event-bus-proxy-{uuid.uuid4().hex}"
        self.bound_frontend: list[str] = []
        self.bound_backend: list[str] = []

    def _open(self) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes], zmq.Socket[bytes]]:
        xsub, xpub, ctl = (self._ctx.socket(zmq.XSUB), self._ctx.socket(zmq.XPUB),
                           self._ctx.socket(zmq.PAIR))
        try:
            for sock in (xsub, xpub, ctl):
                sock.setsockopt(zmq.LINGER, 0)
            xsub.setsockopt(zmq.RCVHWM, self._hwm)
            xpub.setsockopt(zmq.SNDHWM, self._hwm)
            apply_curve(xsub, self._curve, bind=self._frontend)
            apply_curve(xpub, self._curve, bind=self._backend)
            for endpoint in self._frontend:
                xsub.bind(endpoint)
                self.bound_frontend.append(xsub.getsockopt_string(zmq.LAST_ENDPOINT))
            for endpoint in self._backend:
                xpub.bind(endpoint)
                self.bound_backend.append(xpub.getsockopt_string(zmq.LAST_ENDPOINT))
            ctl.bind(self._control)
        except BaseException:
            for sock in (xsub, xpub, ctl):
                sock.close()
            raise
        return xsub, xpub, ctl

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report started, proxy until cancelled, then stop the thread and close."""
        xsub, xpub, ctl = self._open()
        stopper = self._ctx.socket(zmq.PAIR)
        stopper.setsockopt(zmq.LINGER, 0)
        stopper.connect(self._control)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._proxy_thread, xsub, xpub, ctl)
                task_status.started()
                try:
                    await anyio.sleep_forever()
                finally:
                    stopper.send(b"TERMINATE")
        finally:
            stopper.close()
            for sock in (xsub, xpub, ctl):
                sock.close()

    @staticmethod
    async def _proxy_thread(xsub: zmq.Socket[bytes], xpub: zmq.Socket[bytes],
                            ctl: zmq.Socket[bytes]) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(zmq.proxy_steerable, xsub, xpub, None, ctl)
