"""Turns the load plan into credits (closed loop, request rate, fixed schedule) and
knows every credit in flight; a phase ends when all its credits are back."""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import TaskStatus

log = structlog.get_logger("aiperf.timing_manager")


class TimingManager:
    """Skeleton: registers through the runtime, stays up and obeys commands until stopped."""

    def __init__(self, *, service_id: str) -> None:
        self.service_id = service_id

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once; runs until cancelled."""
        task_status.started()
        await anyio.sleep_forever()
