"""`RunView` on its own: what bumps its version (and so wakes the WebSocket watchers)."""

from __future__ import annotations

from aiperf.api.view import RunView
from aiperf.messages import SystemState, SystemStateChanged


def test_a_repeated_state_changes_nothing_and_wakes_no_watcher() -> None:
    view = RunView()
    assert view.state_name == "unknown"
    view.apply(SystemStateChanged(state=SystemState.PROFILING))
    assert (view.state_name, view.version) == ("profiling", 1)
    view.apply(SystemStateChanged(state=SystemState.PROFILING))  # the controller's periodic repeat
    assert view.version == 1
    view.apply(SystemStateChanged(state=SystemState.FAILED, reason="worker-g0-0 exited"))
    assert (view.state_name, view.reason, view.version) == ("failed", "worker-g0-0 exited", 2)
