"""The operator's results volume: each finished run's exports under `<base>/<ns>/<name>/<epoch>/`.

`ResultsStore.harvest` copies every export the controller pod's results sidecar lists (through
the API server's pod proxy, `aiperf.kube.sidecar`) into a staging directory
`<base>/<ns>/<name>/.<epoch>.partial-<random>/`, fsyncs each file and the directory, then renames
it to `<epoch>/` and fsyncs the parent: a run directory exists whole or not at all, and a copy
that breaks off is removed (and retried by the caller), never advertised. `latest.txt` beside the
run directories names the newest harvested epoch (written by a rename, never rolled back to an
older epoch). The results server (a later piece) serves these directories; `status.resultsPath`
is `<ns>/<name>/<epoch>`, relative to the volume.

A run directory holds `.aiperf_run_uid`, the UID of the AIPerfJob it belongs to. The epoch is
the CR's creationTimestamp in whole seconds, so a same-name CR deleted and created again within
one second has the same epoch: its directory is then `<epoch>-<uid prefix>`, never the earlier
incarnation's (whose results stay as they were).
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import anyio
from kubernetes_asyncio.client import ApiClient

from aiperf.kube import sidecar
from aiperf.kube.client import KubeClusterError

LATEST = "latest.txt"
RUN_UID = ".aiperf_run_uid"


@dataclass(frozen=True, kw_only=True)
class Harvest:
    """A stored run: `path` relative to the volume, the file names in it."""

    path: str
    files: list[str]


class ResultsStore:
    """The results volume mounted at `base` (created on first use)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def relative(self, namespace: str, name: str, epoch: str) -> str:
        """`<ns>/<name>/<epoch>`: a run's directory relative to the volume."""
        return f"{namespace}/{name}/{epoch}"

    async def harvest(self, api: ApiClient, namespace: str, name: str, epoch: str, pod: str, uid: str) -> Harvest:
        """Copy the exports of run `name` (CR `uid`) from the results sidecar of `pod` into its
        run directory (see the module doc); a directory of this `uid` already there is a finished
        earlier harvest and is kept as is. KubeClusterError when the sidecar cannot be read, lists
        no export, or a transfer fails (the staging directory is removed)."""
        folder = await anyio.to_thread.run_sync(self._folder_of, namespace, name, epoch, uid)
        relative = self.relative(namespace, name, folder)
        final = self.base / relative
        if await anyio.Path(final).is_dir():
            return Harvest(path=relative, files=sorted(p.name for p in final.iterdir() if p.name != RUN_UID))
        await sidecar.wait_sidecar_ended(api, namespace, pod)
        names = await sidecar.list_exports(api, namespace, pod)
        if not names:
            raise KubeClusterError(f"the results sidecar of pod {pod} lists no export file")
        parent = final.parent
        await anyio.Path(parent).mkdir(parents=True, exist_ok=True)
        staging = parent / f".{folder}.partial-{secrets.token_hex(4)}"
        await anyio.Path(staging).mkdir()
        try:
            for file_name in names:
                await sidecar.download_export(api, namespace, pod, file_name, staging, durable=True)
            await anyio.to_thread.run_sync(_write_durably, staging / RUN_UID, uid + "\n")
            await anyio.to_thread.run_sync(_fsync_dir, staging)
            try:
                await anyio.Path(staging).rename(final)
            except OSError:
                if not await anyio.Path(final).is_dir():
                    raise
                # a concurrent harvest of the same run finished first: its copy stands
            await anyio.to_thread.run_sync(_fsync_dir, parent)
        finally:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
        await anyio.to_thread.run_sync(_write_latest, parent, folder)
        return Harvest(path=relative, files=sorted(names))

    def _folder_of(self, namespace: str, name: str, epoch: str, uid: str) -> str:
        """`epoch`, unless another incarnation of the run already holds that directory."""
        plain = self.base / self.relative(namespace, name, epoch)
        try:
            owner = (plain / RUN_UID).read_text().strip()
        except FileNotFoundError:
            return epoch if not plain.exists() else f"{epoch}-{uid[:8]}"
        return epoch if owner == uid else f"{epoch}-{uid[:8]}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())


def _epoch_of(folder: str) -> int:
    """The epoch of a run directory name (`<epoch>` or `<epoch>-<uid prefix>`)."""
    return int(folder.split("-", 1)[0] or 0)


def _write_latest(parent: Path, folder: str) -> None:
    """`latest.txt` := `folder`, unless it already names a newer epoch (staged, fsynced, renamed)."""
    current = parent / LATEST
    try:
        if _epoch_of(current.read_text().strip()) > _epoch_of(folder):
            return
    except (OSError, ValueError):
        pass
    staged = parent / f".{LATEST}.{secrets.token_hex(4)}"
    _write_durably(staged, folder + "\n")
    os.replace(staged, current)
    _fsync_dir(parent)


__all__ = ["LATEST", "RUN_UID", "Harvest", "ResultsStore"]
