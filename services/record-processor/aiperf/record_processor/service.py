"""Parses raw records and computes per-request metrics."""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import TaskStatus

log = structlog.get_logger("aiperf.record_processor")


class RecordProcessor:
    """Skeleton: registers through the runtime, stays up and obeys commands until stopped."""

    def __init__(self, *, service_id: str) -> None:
        self.service_id = service_id

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once; runs until cancelled."""
        task_status.started()
        await anyio.sleep_forever()
