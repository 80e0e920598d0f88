"""The `credits` channel (timing-manager ROUTER -> worker DEALER) and the `credit_returns`
channel (worker PUSH -> timing-manager PULL).

A credit is permission to send exactly one request. Every credit issued comes back exactly
once as a `CreditReturn`, whatever happened to its request; that is what lets the
timing-manager know when a phase is over.
"""

from __future__ import annotations

from aiperf.messages.base import Message, Phase


class Credit(Message, frozen=True, kw_only=True):
    """Send one request now (or at `scheduled_at_ns`, for open-loop and fixed schedules).

    Times are `time.perf_counter_ns()` of the timing-manager's host.
    `cancel_after_ns` > 0 asks the worker to cancel the request that long after sending it.
    `report_first_token` asks for a `FirstToken` when the first content of a streamed answer
    arrives (the credit holds a prefill slot until then). `url_index` picks the endpoint URL
    (several: round robin per conversation).
    """

    phase: Phase
    num: int
    conversation_id: str
    turn_index: int = 0
    issued_at_ns: int
    scheduled_at_ns: int = 0
    cancel_after_ns: int = 0
    should_cancel: bool = False
    report_first_token: bool = False
    url_index: int = 0


class CancelCredits(Message, frozen=True, kw_only=True):
    """Abort in-flight requests of `phase` (benchmark cancelled or grace period over)."""

    phase: Phase
    reason: str = ""


class TimePing(Message, frozen=True, kw_only=True):
    """Worker -> timing-manager over the credits DEALER: clock sample request."""

    worker_id: str
    seq: int
    sent_at_ns: int


class TimePong(Message, frozen=True, kw_only=True):
    """Timing-manager -> worker: echo of a `TimePing` with the manager's clock reading."""

    seq: int
    ping_sent_at_ns: int
    received_at_ns: int


class WorkerConnected(Message, frozen=True, kw_only=True):
    """A worker is connected on both credit channels and may be given credits."""

    worker_id: str
    group_id: str = ""
    clock_offset_ns: int = 0


class CreditReturn(Message, frozen=True, kw_only=True):
    """The request of credit (`phase`, `num`) is finished: ok, failed or cancelled."""

    worker_id: str
    phase: Phase
    num: int
    ok: bool = True
    cancelled: bool = False
    sent: bool = True
    error: str = ""

    @classmethod
    def of(cls, credit: Credit, *, worker_id: str, ok: bool = True, cancelled: bool = False,
           sent: bool = True, error: str = "") -> CreditReturn:
        """The return of `credit`, with the same phase and number."""
        return cls(worker_id=worker_id, phase=credit.phase, num=credit.num, ok=ok,
                   cancelled=cancelled, sent=sent, error=error)


class FirstToken(Message, frozen=True, kw_only=True):
    """The first response token of credit (`phase`, `num`) arrived (for prefill-aware pacing)."""

    worker_id: str
    phase: Phase
    num: int
    at_ns: int


class CreditAudit(Message, frozen=True, kw_only=True):
    """Timing-manager -> worker, after the credits it sent: "which of my credits do you hold?".
    The worker answers with `HeldCredits` at once. A DEALER receives in order, so every credit
    sent before the audit has reached the worker (or was lost) when it answers."""

    seq: int


class HeldCredits(Message, frozen=True, kw_only=True):
    """Worker -> timing-manager, the answer to `CreditAudit(seq)`: the credits it holds (received,
    not yet returned), by phase. Returns travel on the same socket, before this answer, so a credit
    the worker neither holds nor returned never reached it or its return was lost."""

    worker_id: str
    seq: int
    held: dict[Phase, list[int]] = {}


class WorkerLeaving(Message, frozen=True, kw_only=True):
    """A worker stops taking credits (shutdown); in-flight ones still come back."""

    worker_id: str


CreditChannel = Credit | CancelCredits | TimePong | CreditAudit
CreditUpstream = TimePing
CreditReturnChannel = CreditReturn | FirstToken | WorkerConnected | WorkerLeaving | HeldCredits
