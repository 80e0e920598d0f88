"""What the api knows about the run: the latest state, progress and phase events from the event bus.

`RunView` is fed one `Event` at a time (`apply`) and read by the HTTP handlers (`snapshot`) and
the WebSocket handlers (`next_change`). Progress is the run's folded `aiperf.progress.RunProgress`
(the same fold the CLI dashboard and the controller's status push use). It lives on the
service's event loop; nothing here blocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

from aiperf.messages import (
    DatasetConfigured,
    Event,
    Phase,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    RealtimeMetrics,
    ServiceFailed,
    SystemState,
    SystemStateChanged,
)
from aiperf.progress import PhaseProgress, RunProgress

UNKNOWN_STATE = "unknown"
"""What `state` reads as before any `SystemStateChanged` was seen."""

_PHASE_EVENT_KEY: dict[type[Event], str] = {
    PhaseStarted: "started", PhaseSendingComplete: "sending_complete", PhaseComplete: "complete"}


class RunView:
    """The latest run state seen on the event bus, with change notification.

    Every applied event bumps `version`; `next_change` wakes watchers (coalescing bursts: a
    watcher always gets the newest snapshot, not every intermediate one). After `close` no
    watcher waits any more. Create it inside the event loop that serves it.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.state: SystemState | None = None
        self.reason = ""
        self.dataset: DatasetConfigured | None = None
        self.version = 0
        self.progress = RunProgress()
        self._clock = clock
        self._phases: dict[Phase, dict[str, Any]] = {}
        self._metrics: dict[Phase, dict[str, dict[str, float]]] = {}
        self._failures: list[dict[str, Any]] = []
        self._changed: anyio.Event | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once `close` was called: the service is stopping."""
        return self._closed

    @property
    def state_name(self) -> str:
        """The last `SystemState` seen, or ``"unknown"``."""
        return str(self.state) if self.state is not None else UNKNOWN_STATE

    def apply(self, event: Event) -> None:
        """Record `event` and wake every watcher. Events the api does not show, and the
        controller's repeats of the state it already has, are ignored (no version bump)."""
        match event:
            case SystemStateChanged():
                if (event.state, event.reason) == (self.state, self.reason):
                    return
                self.state, self.reason = event.state, event.reason
            case Progress():
                self.progress = self.progress.apply(event, self._clock())
            case PhaseStarted() | PhaseSendingComplete() | PhaseComplete():
                self.progress = self.progress.apply(event, self._clock())
                self._phases.setdefault(event.phase, {})[_PHASE_EVENT_KEY[type(event)]] = (
                    msgspec.to_builtins(event))
            case DatasetConfigured():
                self.dataset = event
            case RealtimeMetrics():
                self._metrics[event.phase] = event.metrics
            case ServiceFailed():
                self._failures.append(msgspec.to_builtins(event))
            case _:
                return
        self._bump()

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy: state, reason, progress (of each phase the records-manager reported
        on: ``phase``, ``completed``, ``errors``, ``expected``, ``elapsed_s``) and metrics per
        phase, phase events (``started``/``sending_complete``/``complete``), dataset, failures,
        version."""
        return {
            "state": self.state_name,
            "reason": self.reason,
            "progress": {str(p.phase): _progress_entry(p) for p in self.progress.phases if p.elapsed_s is not None},
            "phases": {str(p): dict(events) for p, events in self._phases.items()},
            "metrics": {str(p): m for p, m in self._metrics.items()},
            "dataset": msgspec.to_builtins(self.dataset) if self.dataset is not None else None,
            "failures": list(self._failures),
            "version": self.version,
        }

    async def next_change(self, seen: int) -> int | None:
        """Wait until `version` differs from `seen` and return it; return None at once when
        closed. Pass -1 to get the current version immediately."""
        while not self._closed and self.version == seen:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
        return None if self._closed else self.version

    def close(self) -> None:
        """Stop all watchers: every pending and future `next_change` returns None."""
        self._closed = True
        self._wake()

    def _bump(self) -> None:
        self.version += 1
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


def _progress_entry(p: PhaseProgress) -> dict[str, Any]:
    """One phase's progress as the api has always shown it (a `Progress` broadcast's fields)."""
    return {"kind": "progress", "phase": str(p.phase), "completed": p.completed, "errors": p.errors,
            "expected": p.expected, "elapsed_s": p.elapsed_s}
