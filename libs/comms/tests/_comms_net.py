"""Transport under test, shared by the socket tests (imported as a top-level test module)."""

from __future__ import annotations

from dataclasses import dataclass

from aiperf.comms import Addressing, Channel


@dataclass(frozen=True)
class Net:
    """One transport under test: where binders bind and which bound endpoint connectors use."""

    transport: str  # "ipc" or "tcp"
    addressing: Addressing

    def bind(self, channel: Channel, index: int | None = None) -> list[str]:
        """Endpoints a binder of `channel` binds (dual bind on tcp, like production)."""
        return self.addressing.bind_endpoints(channel, index)

    def pick(self, bound: list[str]) -> str:
        """The actually bound endpoint of this transport (tcp: with its ephemeral port)."""
        picked = [endpoint for endpoint in bound if endpoint.startswith(f"{self.transport}://")]
        assert len(picked) == 1, bound
        return picked[0]
