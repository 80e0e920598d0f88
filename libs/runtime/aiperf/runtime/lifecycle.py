"""The service state machine: starting -> running -> stopping -> stopped, or failed."""

from __future__ import annotations

from aiperf.messages import ServiceState

_ALLOWED: dict[ServiceState, frozenset[ServiceState]] = {
    ServiceState.STARTING: frozenset({ServiceState.RUNNING, ServiceState.STOPPING,
                                      ServiceState.FAILED}),
    ServiceState.RUNNING: frozenset({ServiceState.STOPPING, ServiceState.FAILED}),
    ServiceState.STOPPING: frozenset({ServiceState.STOPPED, ServiceState.FAILED}),
    ServiceState.STOPPED: frozenset(),
    ServiceState.FAILED: frozenset(),
}


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a bug in the caller)."""


class Lifecycle:
    """Current state of one service; `move` enforces the allowed transitions."""

    def __init__(self) -> None:
        self.state = ServiceState.STARTING
        self.error = ""

    def move(self, to: ServiceState, *, error: str = "") -> None:
        """Go to `to`; raises `IllegalTransition` if not allowed from the current state."""
        if to not in _ALLOWED[self.state]:
            raise IllegalTransition(f"{self.state} -> {to}")
        self.state = to
        if error:
            self.error = error

    @property
    def final(self) -> bool:
        """True once stopped or failed."""
        return not _ALLOWED[self.state]
