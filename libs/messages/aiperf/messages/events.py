"""The `event_bus` channel: broadcasts through the XSUB/XPUB proxy.

Routing data is its own frame: the topic is the event's tag (`Event.topic()`), so subscribers
filter by prefix without decoding. Broadcasts are best effort; anything that must arrive goes
over `control`.
"""

from __future__ import annotations

from aiperf.messages.base import Message, Phase, ServiceType, SystemState


class SystemStateChanged(Message, frozen=True, kw_only=True):
    """The run moved to a new `SystemState`."""

    state: SystemState
    reason: str = ""


class PhaseStarted(Message, frozen=True, kw_only=True):
    """The timing-manager began issuing credits for `phase`: at `started_at_ns` on its monotonic
    clock and at `started_wall_ns` on the wall clock (ns since the epoch; 0: not given), which
    other processes of the host or pod can compare with their own (the server-metrics scrapes)."""

    phase: Phase
    started_at_ns: int
    expected_credits: int | None = None
    expected_duration_s: float | None = None
    started_wall_ns: int = 0


class PhaseSendingComplete(Message, frozen=True, kw_only=True):
    """No more credits will be issued for `phase`; `issued` is final."""

    phase: Phase
    issued: int
    at_ns: int


class PhaseComplete(Message, frozen=True, kw_only=True):
    """Every credit of `phase` came back (or was declared lost)."""

    phase: Phase
    issued: int
    returned: int
    lost: int = 0
    at_ns: int = 0


class Progress(Message, frozen=True, kw_only=True):
    """Periodic progress of the running phase, from the records-manager."""

    phase: Phase
    completed: int
    errors: int
    expected: int | None = None
    elapsed_s: float = 0.0


class DatasetConfigured(Message, frozen=True, kw_only=True):
    """The dataset files are written and may be read (locally: `path`; remotely: over HTTP)."""

    conversations: int
    path: str
    checksum: str = ""
    compressed: bool = False


class WorkerGroupReady(Message, frozen=True, kw_only=True):
    """All workers of a group have the dataset and are dispatchable."""

    group_id: str
    workers: list[str]


class RealtimeMetrics(Message, frozen=True, kw_only=True):
    """Live aggregate snapshot: metric tag -> {stat -> value}."""

    phase: Phase
    metrics: dict[str, dict[str, float]]


class ServiceFailed(Message, frozen=True, kw_only=True):
    """A service failed; the controller fails the run with this reason."""

    service_id: str
    service_type: ServiceType
    error: str
    details: dict[str, str] = {}


Event = (
    SystemStateChanged
    | PhaseStarted
    | PhaseSendingComplete
    | PhaseComplete
    | Progress
    | DatasetConfigured
    | WorkerGroupReady
    | RealtimeMetrics
    | ServiceFailed
)


def topic_of(event: Event) -> bytes:
    """The topic frame an event is published under: its tag, ASCII."""
    return type(event).__struct_config__.tag.encode()  # type: ignore[union-attr]
