"""The error taxonomy every service shares.

- `RetryLater`: transient; the caller may try again (peer not ready, resource busy).
- `GiveUp`: permanent; retrying cannot help (the service fails with this reason).
- `UserError`: a user mistake (bad flag, missing file, unreachable URL); one clear line,
  exit code 2, never a traceback.
- `UnknownCommand`: a command this service does not handle (a `GiveUp`: asking again cannot help).
- `BadMessage` (from `aiperf.comms`): a frame that does not decode, with peer and channel.
"""

from __future__ import annotations

from aiperf.comms import BadMessage

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USER_ERROR = 2


class RetryLater(Exception):
    """A transient failure: try again later."""


class GiveUp(Exception):
    """A permanent failure: the operation cannot succeed."""


class UnknownCommand(GiveUp):
    """A control command the receiving service does not handle."""


class UserError(Exception):
    """A user mistake. `str(exc)` is the one line shown to the user."""


class CommandError(Exception):
    """A command's handler failed at the peer; `error` is the peer's error text and
    `error_type` its exception class name (`UserError` marks a user mistake)."""

    def __init__(self, target: str, command: str, error: str, error_type: str = "") -> None:
        self.target, self.command, self.error, self.error_type = target, command, error, error_type
        super().__init__(f"{target} failed {command}: {error_type + ': ' if error_type else ''}{error}")

    @property
    def is_user_error(self) -> bool:
        """True when the peer raised `UserError`: show `error` alone, exit code 2."""
        return self.error_type == "UserError"


def root_cause(exc: BaseException) -> BaseException:
    """The single leaf of nested exception groups (task groups wrap errors), else `exc`."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USER_ERROR", "BadMessage", "CommandError", "GiveUp",
           "RetryLater", "UnknownCommand", "UserError", "root_cause"]
