"""Each service SIGKILLed in the warmup phase: exit 1 naming it, no traceback, no process left
(faults/_phase_kills.py states the bounds and how the phase is found and held)."""

from __future__ import annotations

from pathlib import Path

import pytest
from faults._phase_kills import SERVICES, check_kill_in_phase

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("target", SERVICES)
def test_a_service_killed_in_warmup_ends_the_run_with_its_name(tmp_path: Path, target: str) -> None:
    check_kill_in_phase(tmp_path, "warmup", target)
