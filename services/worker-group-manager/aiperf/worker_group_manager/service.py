"""The worker-group-manager: authority for one group of workers (one pod in Kubernetes, the
whole machine locally). It makes the dataset available to its group and reports the group
ready; the workers and record-processors themselves are separate processes/containers. With
per-pod issuing (`runtime.issuing: per_pod`) it also issues its workers' credits
(`aiperf.issuing.pod.PodIssuer`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.dataset import DatasetReader
from aiperf.messages import Command, GroupReady, PrepareGroup, RawRecordsUploaded, Reply, UploadRawRecords
from aiperf.runtime import GiveUp, UnknownCommand

if TYPE_CHECKING:  # Kubernetes mode only: its HTTP client stays unimported locally
    from aiperf.issuing.pod import PodIssuer
    from aiperf.worker_group_manager.download import PodDataset
    from aiperf.worker_group_manager.upload import RawUploader

log = structlog.get_logger("aiperf.worker_group_manager")


class WorkerGroupManager:
    """Makes the run's dataset readable inside its group.

    Locally (`pod_dataset` None) the dataset directory is shared, so configuring only checks
    that it opens and replies it unchanged. In Kubernetes (`pod_dataset` set) the group's pod
    has its own filesystem: the first `ProfileConfigure` downloads and decompresses the dataset
    once into the pod-local folder, and the reply names that folder, which the controller then
    hands to the group's workers and record-processors.

    At finalize with `--export-level raw` in Kubernetes (`raw_uploader` and `api_url` set), it
    uploads its group's raw parts to the controller's api (`UploadRawRecords`).

    With `issuer` (per-pod issuing) it serves the issuer's engine from the start (its workers'
    pings and `WorkerConnected` on the pod-local sockets) and, once the first `PrepareGroup`
    named the group's dataset, runs the issuer on it: the issuer waits for the group's workers,
    says `PodHello` to the timing-manager and runs the slices it is handed."""

    def __init__(self, *, service_id: str, group_id: str, members: list[str],
                 pod_dataset: PodDataset | None = None, raw_uploader: RawUploader | None = None,
                 api_url: str | None = None, issuer: PodIssuer | None = None) -> None:
        self.service_id, self.group_id, self.members = service_id, group_id, members
        self._pod_dataset = pod_dataset
        self._raw_uploader, self._api_url = raw_uploader, api_url
        self._issuer = issuer
        self._dataset_dir = ""
        self._prepared = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once; runs until cancelled (with an issuer: serves it, see the class)."""
        if self._issuer is None:
            task_status.started()
            await anyio.sleep_forever()
            return
        async with anyio.create_task_group() as tg:
            await tg.start(self._issuer.engine.run)
            task_status.started()
            await self._prepared.wait()
            await self._issuer.run(self._dataset_dir, serve_engine=False)

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`PrepareGroup(dataset_dir=D, dataset_url=U)` -> `GroupReady` naming the group's
        readable copy of the dataset.

        Locally that is D. In Kubernetes it is the pod-local copy, downloaded from U (default:
        ``http://$AIPERF_CONTROLLER_HOST:$AIPERF_API_PORT/api/dataset``) on the first call only.
        `UploadRawRecords(parts, upload_url)` -> `RawRecordsUploaded` once the api acknowledged
        every part with the size sent (`RawUploader.upload`; `upload_url` default: the api named
        by the pod's environment).

        Raises `GiveUp` when the dataset cannot be opened or fetched or a part not uploaded,
        `UnknownCommand` for any other command."""
        if isinstance(command, UploadRawRecords):
            return await self._upload_raw(command)
        if not isinstance(command, PrepareGroup):
            raise UnknownCommand(f"the worker-group-manager does not handle {type(command).__name__}")
        if self._pod_dataset is not None:
            got = await self._pod_dataset.ensure(command.dataset_url or None)
            dataset_dir, conversations = got.directory, got.conversations
        else:
            dataset_dir = Path(command.dataset_dir)
            conversations = await anyio.to_thread.run_sync(_open_count, dataset_dir)
        if not self._prepared.is_set():
            self._dataset_dir = str(dataset_dir)
            self._prepared.set()
        log.info("group.ready", group=self.group_id, members=len(self.members),
                 conversations=conversations, dataset_dir=str(dataset_dir))
        return GroupReady(dataset_dir=str(dataset_dir), group_id=self.group_id, members=self.members,
                          conversations=conversations)


    async def _upload_raw(self, command: UploadRawRecords) -> RawRecordsUploaded:
        if self._raw_uploader is None:
            raise GiveUp("raw parts are uploaded in Kubernetes mode only (locally they are on the "
                         "controller's disk already)")
        url = command.upload_url or self._api_url
        if not url:
            raise GiveUp("no api to upload raw parts to: UploadRawRecords has no upload_url and "
                         "AIPERF_CONTROLLER_HOST is not set in this pod")
        parts = await self._raw_uploader.upload(url, list(command.parts))
        log.info("group.raw_uploaded", group=self.group_id, parts=len(parts),
                 size=sum(p.size for p in parts), records=sum(p.records for p in parts))
        return RawRecordsUploaded(parts=parts)


def _open_count(dataset_dir: Path) -> int:
    try:
        with DatasetReader(dataset_dir) as reader:
            return len(reader)
    except Exception as exc:
        raise GiveUp(f"dataset {dataset_dir} cannot be opened: {exc}") from exc
