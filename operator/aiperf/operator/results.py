"""The operator's results volume: each finished run's exports under `<base>/<ns>/<name>/<epoch>/`.

`ResultsStore.harvest` copies every export the controller pod's results sidecar lists (through
the API server's pod proxy, `aiperf.kube.sidecar`) into a staging directory
`<base>/<ns>/<name>/.<epoch>.partial-<random>/`, fsyncs each file and the directory, then renames
it to `<epoch>/` and fsyncs the parent: a run directory exists whole or not at all, and a copy
that breaks off is removed (and retried by the caller), never advertised. `latest.txt` beside the
run directories names the newest harvested epoch (written by a rename, never rolled back to an
older epoch). The results server (a later piece) serves these directories; `status.resultsPath`
is `<ns>/<name>/<epoch>`, relative to the volume.
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

    async def harvest(self, api: ApiClient, namespace: str, name: str, epoch: str, pod: str) -> Harvest:
        """Copy the exports of run `name` from the results sidecar of `pod` into its epoch
        directory (see the module doc); an epoch directory already there is a finished earlier
        harvest and is kept as is. KubeClusterError when the sidecar cannot be read, lists no
        export, or a transfer fails (the staging directory is removed)."""
        final = self.base / self.relative(namespace, name, epoch)
        if await anyio.Path(final).is_dir():
            return Harvest(path=self.relative(namespace, name, epoch), files=sorted(p.name for p in final.iterdir()))
        await sidecar.wait_sidecar_ended(api, namespace, pod)
        names = await sidecar.list_exports(api, namespace, pod)
        if not names:
            raise KubeClusterError(f"the results sidecar of pod {pod} lists no export file")
        parent = final.parent
        await anyio.Path(parent).mkdir(parents=True, exist_ok=True)
        staging = parent / f".{epoch}.partial-{secrets.token_hex(4)}"
        await anyio.Path(staging).mkdir()
        try:
            for file_name in names:
                await sidecar.download_export(api, namespace, pod, file_name, staging, durable=True)
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
        await anyio.to_thread.run_sync(_write_latest, parent, epoch)
        return Harvest(path=self.relative(namespace, name, epoch), files=sorted(names))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_latest(parent: Path, epoch: str) -> None:
    """`latest.txt` := `epoch`, unless it already names a newer epoch (staged, fsynced, renamed)."""
    current = parent / LATEST
    try:
        if int(current.read_text().strip() or 0) > int(epoch):
            return
    except (OSError, ValueError):
        pass
    staged = parent / f".{LATEST}.{secrets.token_hex(4)}"
    with open(staged, "w") as out:
        out.write(epoch + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(staged, current)
    _fsync_dir(parent)


__all__ = ["LATEST", "Harvest", "ResultsStore"]
