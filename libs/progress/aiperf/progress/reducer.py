"""`RunProgress`: what the phase and progress broadcasts of a run say, folded one event at a time.

    progress = RunProgress()
    progress = progress.apply(PhaseStarted(phase=..., expected_credits=100), at=clock())
    progress = progress.apply(Progress(phase=..., completed=40, errors=1), at=clock())
    progress.phase(Phase.PROFILING).completed        # 40

The rules, the same for every reader:
- a phase exists from its first event (a `Progress` may come before its `PhaseStarted`); phases
  keep the order they were first seen in, `current` is the last one;
- `PhaseStarted` sets `expected` (requests) and `duration_s`; `PhaseSendingComplete` sets `sent`;
  `PhaseComplete` sets `sent` and `ended`, and `completed` to at least `returned`;
- `Progress` (the records-manager's count of records) only ever raises `completed` and `errors`
  (records trail the returned credits: a late broadcast never takes a count back), sets
  `expected` when it knows it, and `elapsed_s`;
- any other event leaves the progress as it is (the same object).

Times (`at`) are the caller's clock, in seconds (monotonic or wall: the reducer only stores
them). Pure: no clock, no I/O; every value is immutable, so a reader may keep an old one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aiperf.messages import Event, Phase, PhaseComplete, PhaseSendingComplete, PhaseStarted, Progress


@dataclass(frozen=True, kw_only=True)
class PhaseProgress:
    """One phase: when it was first seen (`started`) and ended (`ended`, None while it runs), the
    requests it will send (`expected`) or its `duration_s`, those sent (`sent`, once final),
    `completed` and `errors` so far, and the records-manager's `elapsed_s`."""

    phase: Phase
    started: float
    expected: int | None = None
    duration_s: float | None = None
    sent: int | None = None
    completed: int = 0
    errors: int = 0
    ended: float | None = None
    elapsed_s: float | None = None

    def elapsed(self, now: float) -> float:
        """Seconds from its start to its end (to `now` while it runs)."""
        return (self.ended if self.ended is not None else now) - self.started

    def fraction(self, now: float) -> float | None:
        """How far it is (0..1): 1 once ended, else by count when `expected` is known, else by
        time against `duration_s`; None when neither is known."""
        if self.ended is not None:
            return 1.0
        if self.expected:
            return min(1.0, self.completed / self.expected)
        if self.duration_s:
            return min(1.0, self.elapsed(now) / self.duration_s)
        return None


@dataclass(frozen=True)
class RunProgress:
    """Every phase of a run seen so far, in the order first seen (see the module doc)."""

    phases: tuple[PhaseProgress, ...] = ()

    def phase(self, phase: Phase) -> PhaseProgress | None:
        """The progress of `phase`, None before any event of it."""
        return next((p for p in self.phases if p.phase is phase), None)

    @property
    def current(self) -> PhaseProgress | None:
        """The phase seen last (the one running, or the last to run)."""
        return self.phases[-1] if self.phases else None

    def apply(self, event: Event, at: float) -> RunProgress:
        """The progress after `event`, seen at time `at` (see the module doc for the rules)."""
        if not isinstance(event, PhaseStarted | PhaseSendingComplete | PhaseComplete | Progress):
            return self
        before = self.phase(event.phase) or PhaseProgress(phase=event.phase, started=at)
        after = _fold(before, event, at)
        if after == before and before in self.phases:
            return self
        if before in self.phases:
            return RunProgress(tuple(after if p is before else p for p in self.phases))
        return RunProgress((*self.phases, after))


def _fold(p: PhaseProgress, event: PhaseStarted | PhaseSendingComplete | PhaseComplete | Progress,
          at: float) -> PhaseProgress:
    match event:
        case PhaseStarted():
            return replace(p, expected=event.expected_credits, duration_s=event.expected_duration_s)
        case PhaseSendingComplete():
            return replace(p, sent=event.issued)
        case PhaseComplete():
            return replace(p, sent=event.issued, ended=at, completed=max(p.completed, event.returned))
        case Progress():
            return replace(p, completed=max(p.completed, event.completed), errors=max(p.errors, event.errors),
                           expected=event.expected if event.expected is not None else p.expected,
                           elapsed_s=event.elapsed_s)


__all__ = ["PhaseProgress", "RunProgress"]
