"""The worker-group-manager: authority for one group of workers (one pod in Kubernetes, the
whole machine locally). It makes the dataset available to its group and reports the group
ready; the workers and record-processors themselves are separate processes/containers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.dataset import DatasetReader
from aiperf.messages import Command, ProfileConfigure
from aiperf.runtime import GiveUp

log = structlog.get_logger("aiperf.worker_group_manager")


class WorkerGroupManager:
    """Locally the dataset directory is shared, so configuring only checks it opens.
    (Kubernetes mode downloads and decompresses it once per pod: see issue 4.)"""

    def __init__(self, *, service_id: str, group_id: str, members: list[str]) -> None:
        self.service_id, self.group_id, self.members = service_id, group_id, members

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once; runs until cancelled."""
        task_status.started()
        await anyio.sleep_forever()

    async def handle(self, command: Command) -> dict[str, Any]:
        """`ProfileConfigure(options={"dataset_dir": D})`: the group's dataset is readable."""
        if not isinstance(command, ProfileConfigure):
            raise ValueError(f"worker-group-manager does not handle {type(command).__name__}")
        dataset_dir = Path(str(command.options.get("dataset_dir", "")))
        try:
            with DatasetReader(dataset_dir) as reader:
                conversations = len(reader)
        except Exception as exc:
            raise GiveUp(f"dataset {dataset_dir} cannot be opened: {exc}") from exc
        log.info("group.ready", group=self.group_id, members=len(self.members),
                 conversations=conversations)
        return {"group_id": self.group_id, "members": self.members, "conversations": conversations}
