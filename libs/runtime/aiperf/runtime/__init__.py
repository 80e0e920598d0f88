"""Service runtime: lifecycle, control-channel client, logging, error taxonomy."""

from aiperf.runtime.control_client import ControlClient
from aiperf.runtime.entry import service_main
from aiperf.runtime.errors import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USER_ERROR,
    CommandError,
    GiveUp,
    RetryLater,
    UnknownCommand,
    UserError,
)
from aiperf.runtime.lifecycle import IllegalTransition, Lifecycle
from aiperf.runtime.logs import configure_logging
from aiperf.runtime.service import (
    Build,
    CommandHandler,
    Service,
    ServiceContext,
    addressing_of,
    run_service,
)

__all__ = [
    "EXIT_FAILED", "EXIT_OK", "EXIT_USER_ERROR", "Build", "CommandError", "CommandHandler",
    "ControlClient", "GiveUp", "IllegalTransition", "Lifecycle", "RetryLater", "Service",
    "ServiceContext", "UnknownCommand", "UserError", "addressing_of", "configure_logging", "run_service",
    "service_main",
]
