"""`StartupTrace`: where the time of a local run goes (`aiperf profile --profile-startup`).

Marks are wall-clock nanoseconds (`time.time_ns()`), so marks taken in other processes (the
zygote's imports and forks, each service's registration as the control channel saw it) line
up with the command's own start (`t0_wall_ns`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TextIO

from aiperf.messages import SystemState
from aiperf.runtime.control_server import ServiceInfo


class StartupTrace:
    """Collects named marks; `render` prints them in time order with the gap to the previous."""

    def __init__(self, t0_wall_ns: int) -> None:
        self.t0_wall_ns = t0_wall_ns
        self.marks: list[tuple[int, str]] = []
        self._finishers: list[Callable[[], None]] = []

    def on_finish(self, collect: Callable[[], None]) -> None:
        """Run `collect` (it adds marks known only at the end) before rendering."""
        self._finishers.append(collect)

    def mark(self, name: str, at_ns: int | None = None) -> None:
        """Record `name` now (or at `at_ns`, wall clock)."""
        self.marks.append((time.time_ns() if at_ns is None else at_ns, name))

    def extend(self, marks: Iterable[tuple[str, int]]) -> None:
        """Add `(name, wall_ns)` marks taken elsewhere (the zygote's)."""
        for name, at in marks:
            self.mark(name, at)

    async def on_state(self, state: SystemState) -> None:
        """A `run_system` state callback: marks each state of the run."""
        self.mark(f"state {state}")

    def add_services(self, services: Mapping[str, ServiceInfo]) -> None:
        """Mark when each service registered and when it first said `running`."""
        for sid, info in services.items():
            if info.registered_wall_ns:
                self.mark(f"registered {sid}", info.registered_wall_ns)
            if info.running_wall_ns:
                self.mark(f"running {sid}", info.running_wall_ns)

    def render(self, out: TextIO = sys.stderr) -> None:
        """Print every mark: seconds since the command started, the gap since the previous mark."""
        for collect in self._finishers:
            collect()
        self._finishers.clear()
        print("start-up profile (s since command start, +gap since the previous line):", file=out)
        previous = self.t0_wall_ns
        for at, name in sorted(self.marks):
            print(f"  {(at - self.t0_wall_ns) / 1e9:7.3f}  +{(at - previous) / 1e9:6.3f}  {name}", file=out)
            previous = at
