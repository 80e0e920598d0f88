"""When this `aiperf` command started, for the start-up figure (command start to first request).
Imported first by `aiperf.cli.main`, so the value is taken at process start."""

from __future__ import annotations

import time

T0_WALL_NS = time.time_ns()
