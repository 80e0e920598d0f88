"""The timing-manager of a per-pod run (`runtime.issuing: per_pod`): the control commands the
per-request engine (`aiperf.issuing.engine.TimingManager`) obeys, served by a
`PodCoordinator`, so the system-controller drives both the same way (docs/run-protocol.md).
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.issuing.coordinator import PodCoordinator
from aiperf.messages import (
    Command,
    CreditsLost,
    ProfileCancel,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    Reply,
    WorkerLost,
)
from aiperf.runtime import GiveUp, UnknownCommand

log = structlog.get_logger("aiperf.issuing.pods")


class ShardedTimingManager:
    """`ProfileConfigure` waits until every worker pod said `PodHello` (a pod says it once its
    own workers connected to it: the registration timeout applies to both); `ProfileStart`
    runs every phase through the pods and answers `ProfileFinished` with the pods' sums
    (`PodRunTotals.accounting`); `ProfileCancel` tells the pods to stop; `WorkerLost` is passed
    on to the pods (its credits are counted lost in its pod's counters, so the reply says 0).

    `run` serves the pods' messages until cancelled (ready at once)."""

    def __init__(self, *, service_id: str, coordinator: PodCoordinator) -> None:
        self.service_id = service_id
        self.coordinator = coordinator
        self._configured = False
        self._started = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the `pods` channel until cancelled; ready at once."""
        await self.coordinator.run(task_status=task_status)

    async def handle(self, command: Command[Any]) -> Reply | None:
        """Obey one control command (see the class); raises `GiveUp` on misuse or when the pods
        did not register in time, `UnknownCommand` for any other command."""
        match command:
            case ProfileConfigure():
                pods = await self.coordinator.wait_registered()
                self._configured = True
                log.info("pods.configured", pods=pods)
                return None
            case ProfileStart():
                if not self._configured:
                    raise GiveUp("ProfileStart before ProfileConfigure")
                if self._started:
                    raise GiveUp("ProfileStart: a per-pod run starts once")
                self._started = True
                totals = await self.coordinator.start()
                return ProfileFinished(accounting=totals.accounting())
            case ProfileCancel(reason=reason):
                self.coordinator.cancel(reason or "ProfileCancel")
                return None
            case WorkerLost(worker_id=worker_id):
                await self.coordinator.worker_lost(worker_id)
                return CreditsLost(lost=0)
        raise UnknownCommand(f"the timing-manager does not handle {type(command).__name__}")


__all__ = ["ShardedTimingManager"]
