"""The `control` channel: services (DEALER) <-> system-controller (ROUTER).

Services send `ToController` messages; the controller sends `ToService` messages. Every command
carries a `request_id` that its `CommandReply` echoes; a failed handler travels back as
`ok=False` with the error text.
"""

from __future__ import annotations

from typing import Any

from aiperf.messages.base import Message, ServiceState, ServiceType


class Register(Message, frozen=True, kw_only=True):
    """First message of a service: who it is, and where it runs."""

    service_id: str
    service_type: ServiceType
    pid: int
    host: str = ""
    group_id: str = ""


class Heartbeat(Message, frozen=True, kw_only=True):
    """Periodic liveness signal; `state` is the sender's current lifecycle state."""

    service_id: str
    state: ServiceState
    sent_at_ns: int = 0


class ServiceStatus(Message, frozen=True, kw_only=True):
    """A lifecycle transition, sent when it happens (not only on the next heartbeat)."""

    service_id: str
    state: ServiceState
    error: str = ""


class CommandReply(Message, frozen=True, kw_only=True):
    """Answer to one command; `error` (and the exception's class name in `error_type`, e.g.
    `UserError`) is set when `ok` is false."""

    request_id: str
    service_id: str
    ok: bool
    error: str = ""
    result: dict[str, Any] = {}
    error_type: str = ""


class Shutdown(Message, frozen=True, kw_only=True):
    """Stop gracefully and exit 0."""

    request_id: str
    reason: str = ""


class ProfileConfigure(Message, frozen=True, kw_only=True):
    """Prepare for the run (build the dataset, connect to peers); reply when ready."""

    request_id: str
    options: dict[str, Any] = {}


class ProfileStart(Message, frozen=True, kw_only=True):
    """Begin the benchmark (timing-manager starts issuing credits)."""

    request_id: str


class ProfileCancel(Message, frozen=True, kw_only=True):
    """Stop the benchmark early; services keep what they have and finish their part."""

    request_id: str
    reason: str = ""


class ServiceCommand(Message, frozen=True, kw_only=True):
    """A service-specific request: `name` selects the handler, `args` are its arguments."""

    request_id: str
    name: str
    args: dict[str, Any] = {}


ToController = Register | Heartbeat | ServiceStatus | CommandReply
ToService = Shutdown | ProfileConfigure | ProfileStart | ProfileCancel | ServiceCommand
Command = ToService
