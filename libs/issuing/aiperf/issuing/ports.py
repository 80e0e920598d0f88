"""The timing-manager's ports: what it needs from sockets, the dataset and time.

`main.py` passes the real things (`RouterSocket`, `PullSocket`, `Publisher`, a
`DatasetReader` adapter, `time.perf_counter_ns`, `anyio.sleep`); tests pass fakes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import NamedTuple, Protocol

from aiperf.messages import CreditReturnChannel, Event, TimePing

Clock = Callable[[], int]
"""Monotonic nanoseconds (`time.perf_counter_ns`); credit times are in this clock."""

Sleep = Callable[[float], Awaitable[None]]
"""Wait this many seconds (`anyio.sleep`); cancellable."""


class CreditRouter(Protocol):
    """The `credits` ROUTER: credits, cancels and pongs out (addressed by worker identity),
    pings in. `send` raises `aiperf.comms.PeerUnreachable` for an unknown peer."""

    async def send(self, peer: bytes, message: object) -> None: ...

    def send_nowait(self, peer: bytes, message: object) -> None:
        """`send` at once, or raise `anyio.WouldBlock` having sent nothing."""
        ...

    async def broadcast(self, peers: Iterable[bytes], message: object) -> list[bytes]: ...

    async def recv(self) -> tuple[bytes, TimePing]: ...


class ReturnSource(Protocol):
    """The `credit_returns` PULL: returns, first tokens, worker arrivals and departures."""

    async def recv(self) -> CreditReturnChannel: ...


class EventSink(Protocol):
    """The event-bus publisher (best effort)."""

    async def publish(self, event: Event) -> None: ...


class TurnTiming(NamedTuple):
    """When a turn may be sent: `delay_ms` after the previous turn returned, or at the trace
    time `timestamp_ms` (fixed schedule); None where the dataset has none."""

    delay_ms: float | None
    timestamp_ms: float | None


class Conversations(Protocol):
    """Read-only view of the dataset the plan is built from."""

    def __len__(self) -> int: ...

    def ids(self) -> list[str]:
        """Conversation ids in storage order."""
        ...

    def timestamps(self) -> list[float | None]:
        """First-turn `timestamp_ms` of each conversation (None where absent)."""
        ...

    def turns(self, index: int) -> Sequence[TurnTiming]:
        """Timing of every turn of conversation `index` (at least one)."""
        ...

    def close(self) -> None: ...


OpenConversations = Callable[[str], Conversations]
"""Opens the dataset in a directory; raises `aiperf.dataset.DatasetError` when it cannot."""
