"""The one fold of a run's progress events: `RunProgress.apply(event, at)` (pure, immutable),
read by the CLI dashboard, the controller's status push and the api, so the three agree."""

from aiperf.progress.reducer import PhaseProgress, RunProgress

__all__ = ["PhaseProgress", "RunProgress"]
