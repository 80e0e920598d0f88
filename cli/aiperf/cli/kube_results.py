"""`kube results NAME` in operator mode: download a stored run from the operator's results
server (`aiperf.results`, the `results-server` container on port 8081) through the API server's
services proxy (`/api/v1/namespaces/OPNS/services/aiperf-operator:http-results/proxy/...`, so
no port-forward and no kubectl), with the ApiClient's own credentials.

The run is the AIPerfJob's `status.runEpoch` (waiting for the run to end first), or `--epoch`,
or, once the CR is gone, the job's newest successful run (`latestEpoch`). Its files go to
ARTIFACT_DIR/NAME/ (each written to a temporary name, then renamed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from aiperf.kubeapi import SERVICES, KubeApi, KubeClusterError, KubeError, proxy_path
from aiperf.kuberun import jobs

OPERATOR_NAMESPACE = "aiperf-system"
SERVICE, PORT = "aiperf-operator", "http-results"
"""The chart's Service of the results server and its named port."""
_PLAIN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
CHUNK = 1 << 16


class NoResultsServer(KubeClusterError):
    """The API server knows no such Service (or namespace): no operator chart there."""


class ResultsServerClient:
    """GETs on the results server through the services proxy of `namespace`/`service`:`port`."""

    def __init__(self, api: KubeApi, *, namespace: str = OPERATOR_NAMESPACE, service: str = SERVICE,
                 port: str = PORT) -> None:
        self._api = api
        self._where = f"service {namespace}/{service}:{port}"
        self._base = api.url(proxy_path(SERVICES, namespace, service, port))

    async def _get(self, path: str) -> aiohttp.ClientResponse:
        try:
            response = await self._api.session.get(self._base + path, headers=await self._api.auth_headers(),
                                                   proxy=self._api.proxy)
        except aiohttp.ClientError as exc:
            raise KubeClusterError(f"the API server cannot be reached: {exc}") from None
        if response.status in (401, 403):
            response.release()
            raise KubeError(f"not allowed to reach the results server ({self._where}) through the API server "
                            f"({response.status}): you need get on services/proxy in its namespace")
        return response

    async def json(self, path: str) -> Any | None:
        """The JSON body of `GET path`; None for the server's own 404 (a JSON error body).
        KubeClusterError when the server is not there or answers another error."""
        response = await self._get(path)
        async with response:
            body = await response.read()
            detail = _detail(body)
            if response.status == 404 and detail is not None:
                return None
            if response.status != 200:
                raise self._failure(path, response.status, detail or body[:200].decode("utf-8", "replace"))
            return await response.json(content_type=None)

    async def download(self, path: str, dest: Path) -> None:
        """`GET path` into file `dest` (whole or not at all)."""
        response = await self._get(path)
        partial = dest.with_name(f".{dest.name}.part")
        async with response:
            if response.status != 200:
                raise self._failure(path, response.status, _detail(await response.read()) or "")
            try:
                with open(partial, "wb") as out:
                    async for chunk in response.content.iter_chunked(CHUNK):
                        out.write(chunk)
                partial.replace(dest)
            except (aiohttp.ClientError, OSError) as exc:
                partial.unlink(missing_ok=True)
                raise KubeClusterError(f"downloading {dest.name} from the results server failed: {exc}") from None

    def _failure(self, path: str, status: int, detail: str) -> KubeClusterError:
        if status == 404:
            return NoResultsServer(f"no results server at {self._where} (404: is the aiperf-operator chart "
                                    "installed there? --operator-namespace names another namespace)")
        if status == 503:
            return KubeClusterError(f"the results server ({self._where}) is not reachable: {detail}")
        return KubeClusterError(f"GET {path} on the results server answered {status}: {detail}")


def _detail(body: bytes) -> str | None:
    """The `detail` of the results server's JSON error body, else None (another server's)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return str(value["detail"]) if isinstance(value, dict) and "detail" in value and "status_code" in value else None


async def _epoch_of_job(api: KubeApi, name: str, namespace: str) -> str | None:
    """The run epoch of AIPerfJob `namespace/name` once it has ended Completed (waiting for its
    end); None when there is no such CR (or no epoch). KubeError when it ended otherwise."""
    job = await jobs.get_job(api, name, namespace)
    if job is None:
        return None
    phase = jobs.phase_of(job)
    if phase not in jobs.TERMINAL_PHASES:
        print(f"waiting for run {name} to end (phase {phase or 'Pending'})")
        phase = await jobs.watch_job_until_done(api, name, namespace)
        job = await jobs.get_job(api, name, namespace) or job
    if phase != "Completed":
        raise KubeError(f"run {name} ended {phase}: the operator stored no results; "
                        f"`aiperf kube results {name} --from-pods -n {namespace}` reads what its pod left")
    return str((job.get("status") or {}).get("runEpoch") or "") or None


def _job_path(namespace: str, name: str) -> str:
    """The results server's path of job `namespace/name` (its runs are under `/runs/EPOCH`)."""
    return f"/api/v1/results/{quote(namespace, safe='')}/{quote(name, safe='')}"


async def _latest_epoch(client: ResultsServerClient, name: str, namespace: str) -> str:
    """The newest successful run the results server stores of a job whose CR is gone."""
    try:
        listing = await client.json(_job_path(namespace, name) + "/runs")
    except NoResultsServer as exc:
        raise KubeError(f"no AIPerfJob {name} in namespace {namespace}, and {exc}; "
                        "for a direct-mode run pass --from-pods") from None
    epoch = (listing or {}).get("latestEpoch")
    if not epoch:
        raise KubeError(f"no AIPerfJob {name} in namespace {namespace} and no stored results of it; "
                        f"for a direct-mode run pass --from-pods")
    return str(epoch)


async def _download_run(client: ResultsServerClient, name: str, namespace: str, epoch: str,
                        dest: Path) -> list[str]:
    """Download the stored files of run `epoch` of job `namespace/name` into folder `dest`; their
    names. KubeError when the server has no such run, or no file of it."""
    run_path = f"{_job_path(namespace, name)}/runs/{quote(epoch, safe='')}"
    run = await client.json(run_path)
    if run is None:
        raise KubeError(f"the results server has no run {epoch} of {namespace}/{name}; "
                        f"`aiperf kube results {name} --epoch E` with an epoch it lists")
    names = [f["name"] for f in run.get("files") or [] if _PLAIN.match(str(f.get("name", "")))]
    if not names:
        raise KubeError(f"run {epoch} of {namespace}/{name} has no stored files (phase {run.get('phase')})")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KubeError(f"cannot create {dest}: {exc.strerror or exc}") from None
    for file_name in names:
        await client.download(f"{run_path}/{quote(file_name, safe='')}", dest / file_name)
    return names


async def fetch_stored(api: KubeApi, name: str, namespace: str, artifact_dir: str, *, epoch: str | None,
                       client: ResultsServerClient) -> Path:
    """Download run `epoch` (see the module doc for the default) of `namespace/name` into
    ARTIFACT_DIR/NAME/; returns that folder. KubeError when there is no such run (a user
    mistake), KubeClusterError when the server cannot be read."""
    if epoch is None:
        epoch = await _epoch_of_job(api, name, namespace)
    if not epoch:
        epoch = await _latest_epoch(client, name, namespace)
    dest = Path(artifact_dir) / name
    names = await _download_run(client, name, namespace, epoch, dest)
    print(f"results: {dest}/ ({', '.join(names)}) from the operator's results server, run epoch {epoch}")
    return dest


__all__ = ["OPERATOR_NAMESPACE", "NoResultsServer", "ResultsServerClient", "fetch_stored"]
