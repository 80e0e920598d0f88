"""Sweeps in a cluster: AIPerfSweep custom resources, and the executor that runs a sweep's planned
runs as its child AIPerfJobs (`ChildJobExecutor`, the cluster `AsyncRunExecutor` of
`aiperf.config.sweep`), through `aiperf.kubeapi`.

`ChildJobExecutor.execute(run, benchmark)` creates the child (or adopts the one this sweep
already owns, only when its run digest is the one planned now: `PlanMismatch` otherwise), polls
it until it ends, reads its summary (`SummarySource`), and cancels it when the sweep is cancelled
or gone meanwhile. Errors: `KubeError` for what the user can fix, `KubeClusterError` for the
cluster's failures, as everywhere in `aiperf.kuberun`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog

from aiperf.config import Benchmark
from aiperf.config.sweep import PlannedRun, RunOutcome
from aiperf.crd.model import SWEEP_KIND, JobPhase
from aiperf.kubeapi import (
    ApiError,
    KubeApi,
    KubeClusterError,
    KubeError,
    Obj,
    Resource,
    fenced,
    leaving,
    uid_of,
)
from aiperf.kuberun import sidecar
from aiperf.kuberun.jobs import CR_API_VERSION, JOBS, TERMINAL_PHASES
from aiperf.kuberun.sweep_plan import (
    EXIT_CANCELLED,
    RUN_DIGEST_ANNOTATION,
    SUMMARY_FILE,
    child_body,
    child_name,
    is_owned_by,
    run_digest,
)

log = structlog.get_logger("aiperf.kuberun.sweeps")
SWEEPS = Resource(CR_API_VERSION, SWEEP_KIND, "aiperfsweeps")
_TERMINAL = frozenset(p.value for p in TERMINAL_PHASES)


def no_sweep(name: str, namespace: str) -> KubeError:
    """The error for a sweep that does not exist."""
    return KubeError(f"no AIPerfSweep {name} in namespace {namespace}; `aiperf kube list --kind sweep` shows them")


def sweep_phase(sweep: Mapping[str, Any]) -> str | None:
    """`status.phase` of an AIPerfSweep (None until the operator wrote one)."""
    return (sweep.get("status") or {}).get("phase")


async def get_cr(api: KubeApi, resource: Resource, namespace: str, name: str) -> Obj | None:
    """The AIPerfJob or AIPerfSweep (`JOBS`, `SWEEPS`) `namespace/name`, None when absent."""
    try:
        return await api.get(resource, namespace, name)
    except ApiError as exc:
        raise KubeClusterError(f"reading {resource.kind} {namespace}/{name} failed: {exc.describe()}") from None


async def create_sweep(api: KubeApi, body: Mapping[str, Any]) -> Obj:
    """Create the AIPerfSweep `body`; KubeError when the name is taken or the cluster does not
    serve AIPerfSweeps, KubeClusterError for another refusal."""
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    try:
        return await api.create(body)
    except ApiError as exc:
        if exc.status == 409:
            raise KubeError(f"an AIPerfSweep {name} already exists in {namespace}; "
                            f"`aiperf kube delete {name} --kind sweep -n {namespace}` or pick another --name") from None
        if exc.not_found:
            raise KubeError("the cluster does not serve AIPerfSweeps: install the aiperf operator") from None
        raise KubeClusterError(f"creating AIPerfSweep {name} failed: {exc.describe()}") from None


async def cancel_cr(api: KubeApi, resource: Resource, cr: Mapping[str, Any]) -> bool:
    """Set `spec.cancel` on the AIPerfJob or AIPerfSweep read as `cr`, fenced on its UID; False
    when it is gone or replaced."""
    meta = cr["metadata"]
    try:
        await api.patch(resource, meta["namespace"], meta["name"],
                        fenced(uid_of(cr), {"op": "add", "path": "/spec/cancel", "value": True}))
    except ApiError as exc:
        if exc.status in (404, 409, 422):
            return False
        raise KubeClusterError(f"cancelling {resource.kind} {meta['name']} failed: {exc.describe()}") from None
    return True


async def delete_sweep(api: KubeApi, sweep: Mapping[str, Any]) -> bool:
    """Delete the AIPerfSweep read as `sweep`, fenced on its UID (Background: the operator cancels
    its children first, garbage collection removes them); False when it went or was replaced."""
    meta = sweep["metadata"]
    try:
        return await api.delete(SWEEPS, meta["namespace"], meta["name"], uid=uid_of(sweep))
    except ApiError as exc:
        if exc.lost_race:
            return False
        raise KubeClusterError(f"deleting AIPerfSweep {meta['name']} failed: {exc.describe()}") from None


async def list_sweeps(api: KubeApi, namespace: str | None) -> list[Obj] | None:
    """The AIPerfSweeps of `namespace` (None: every namespace); None when the cluster does not
    serve them."""
    try:
        return (await api.list_all(SWEEPS, namespace)).items
    except ApiError as exc:
        if exc.not_found:
            return None
        raise KubeClusterError(f"listing AIPerfSweeps failed: {exc.describe()}") from None


class ForeignChild(KubeError):
    """A child's name is held by an AIPerfJob this sweep does not own: the sweep cannot go on."""


class PlanMismatch(KubeError):
    """A child this sweep owns was created from another plan than the one made now (a restarted
    sweep-controller replanned differently): adopting it would mix runs, so the sweep stops."""


class SummarySource(Protocol):
    """Where a finished child's summary document comes from."""

    async def fetch(self, child: Mapping[str, Any]) -> dict[str, Any] | None:
        """The child's `profile_export_aiperf.json` document, None when it cannot be had."""
        ...


RESULTS_SERVICE_ENV = "AIPERF_RESULTS_SERVICE"
"""`<namespace>/<service>:<port>` of the operator's results server (the sweep-controller's fallback)."""


class ResultsServerSummaries:
    """Summaries of Completed children read from the operator's copy: its results server, through
    the API server's services/proxy (`service` is `<namespace>/<name>:<port>`), at
    `/api/v1/results/<ns>/<child>/runs/<status.runEpoch>/profile_export_aiperf.json`."""

    def __init__(self, *, api: KubeApi, service: str) -> None:
        namespace, _, name_port = service.partition("/")
        if not namespace or ":" not in name_port:
            raise ValueError(f"results service {service!r}: expected <namespace>/<service>:<port>")
        self._api, self._namespace, self._service = api, namespace, name_port

    async def fetch(self, child: Mapping[str, Any]) -> dict[str, Any] | None:
        """See `SummarySource.fetch`: None when the child has no stored run or it cannot be read."""
        meta, status = child["metadata"], child.get("status") or {}
        epoch = status.get("runEpoch")
        if status.get("phase") != JobPhase.COMPLETED.value or not epoch:
            return None
        path = (f"/api/v1/namespaces/{self._namespace}/services/{self._service}/proxy/api/v1/results/"
                f"{meta['namespace']}/{meta['name']}/runs/{epoch}/{SUMMARY_FILE}")
        try:
            doc = await self._api.request("GET", path)
        except KubeError as exc:
            log.warning("sweep.stored_summary_unavailable", child=meta["name"], error=str(exc))
            return None
        return doc if isinstance(doc, dict) else None


class SidecarSummaries:
    """Summaries read from each child's results sidecar (through the API server's pod proxy),
    kept in `cache_dir/<child>.json` so a restarted container does not need the sidecar again;
    the sidecar is retired once read. When the sidecar is gone (its linger time passed, its pod
    deleted), `fallback` (the operator's copy, `ResultsServerSummaries`) is asked instead."""

    def __init__(self, *, api: KubeApi, cache_dir: Path, fallback: SummarySource | None = None) -> None:
        self._api, self._cache, self._fallback = api, cache_dir, fallback

    async def fetch(self, child: Mapping[str, Any]) -> dict[str, Any] | None:
        """See `SummarySource.fetch`; a sidecar that cannot be read gives None (logged)."""
        meta = child["metadata"]
        cached = self._cache / f"{meta['name']}.json"
        if not await anyio.Path(cached).is_file():
            try:
                pod = await sidecar.results_pod(self._api, meta["name"], meta["namespace"])
                await anyio.Path(self._cache).mkdir(parents=True, exist_ok=True)
                got = await sidecar.download_export(self._api, meta["namespace"], pod, SUMMARY_FILE, self._cache)
                await anyio.Path(got).rename(cached)
            except KubeError as exc:
                log.warning("sweep.summary_unavailable", child=meta["name"], error=str(exc))
                return await self._from_fallback(child, cached)
            try:
                await sidecar.shutdown_sidecar(self._api, meta["namespace"], pod)
            except KubeClusterError as exc:  # it exits by itself after its linger time
                log.warning("sweep.sidecar_shutdown_failed", child=meta["name"], error=str(exc))
        try:
            doc = json.loads(await anyio.Path(cached).read_bytes())
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    async def _from_fallback(self, child: Mapping[str, Any], cached: Path) -> dict[str, Any] | None:
        doc = await self._fallback.fetch(child) if self._fallback is not None else None
        if doc is None:
            return None
        log.info("sweep.summary_from_stored_copy", child=child["metadata"]["name"])
        await anyio.Path(self._cache).mkdir(parents=True, exist_ok=True)
        partial = anyio.Path(f"{cached}.part")
        await partial.write_bytes(json.dumps(doc).encode())
        await partial.rename(cached)
        return doc


class ChildJobExecutor:
    """Runs planned runs of the AIPerfSweep `sweep_cr` (as read at start) as its child AIPerfJobs,
    one at a time (see the module doc). `poll_s`: seconds between reads of the child and the
    sweep while a run goes on."""

    def __init__(self, *, api: KubeApi, sweep_cr: Mapping[str, Any], summaries: SummarySource,
                 poll_s: float = 2.0) -> None:
        self._api, self._sweep, self._summaries, self._poll_s = api, sweep_cr, summaries, poll_s
        meta = sweep_cr["metadata"]
        self._ns, self._name, self._uid = meta["namespace"], meta["name"], meta["uid"]

    async def existing(self, run: PlannedRun) -> Obj | None:
        """The child of `run` when it exists and is this sweep's; ForeignChild when another
        object holds its name."""
        child = await get_cr(self._api, JOBS, self._ns, child_name(self._name, run))
        if child is not None and not is_owned_by(child, self._name, self._uid):
            raise ForeignChild(f"AIPerfJob {self._ns}/{child['metadata']['name']} exists but is not a child of "
                               f"AIPerfSweep {self._name} (uid {self._uid}); delete it or rename the sweep")
        return child

    async def sweep_cancelled(self) -> bool:
        """True when the sweep asks to stop: `spec.cancel`, or it is being deleted (its
        finalizer not yet released), gone or replaced."""
        live = await get_cr(self._api, SWEEPS, self._ns, self._name)
        return leaving(live, self._uid) or ((live or {}).get("spec") or {}).get("cancel") is True

    def _adopt(self, child: Mapping[str, Any], digest: str) -> None:
        """Adopt `child` (created by an earlier incarnation) when it runs what is planned now."""
        found = (child["metadata"].get("annotations") or {}).get(RUN_DIGEST_ANNOTATION)
        if found != digest:
            raise PlanMismatch(f"AIPerfJob {self._ns}/{child['metadata']['name']} was created from another plan "
                               f"(run digest {found}, replanned {digest}); not adopting it")
        log.info("sweep.child_adopted", sweep=self._name, child=child["metadata"]["name"], digest=digest)

    async def _start(self, run: PlannedRun, benchmark: Benchmark) -> Obj:
        """The child of `run`: created now, or adopted (see `_adopt`)."""
        digest = run_digest(benchmark)
        child = await self.existing(run)
        if child is not None:
            self._adopt(child, digest)
            return child
        body = child_body(self._sweep, run, benchmark)
        try:
            created = await self._api.create(body)
            log.info("sweep.child_created", sweep=self._name, child=body["metadata"]["name"])
            return created
        except ApiError as exc:
            if exc.status != 409:
                raise KubeClusterError(f"creating AIPerfJob {body['metadata']['name']} failed: "
                                       f"{exc.describe()}") from None
        child = await self.existing(run)  # created by an earlier incarnation meanwhile
        if child is None:
            raise KubeClusterError(f"AIPerfJob {body['metadata']['name']} was being replaced")
        self._adopt(child, digest)
        return child

    async def execute(self, run: PlannedRun, benchmark: Benchmark) -> RunOutcome:
        """Run `run` as a child AIPerfJob and wait for its end: exit 0 with its summary when it
        completed, 1 when it failed (or left no summary), `EXIT_CANCELLED` when the sweep was
        cancelled meanwhile (the child is cancelled too). Raises ForeignChild, PlanMismatch,
        KubeClusterError."""
        child: Obj | None = await self._start(run, benchmark)
        while child is not None and (phase := (child.get("status") or {}).get("phase")) not in _TERMINAL:
            if await self.sweep_cancelled():
                await cancel_cr(self._api, JOBS, child)
                return RunOutcome(exit_code=EXIT_CANCELLED, summary=None)
            await anyio.sleep(self._poll_s)
            child = await self.existing(run)
        if child is None or phase != JobPhase.COMPLETED.value:  # failed, or deleted under us: the run is lost
            return RunOutcome(exit_code=1, summary=None)
        summary = await self._summaries.fetch(child)
        return RunOutcome(exit_code=0 if summary is not None else 1, summary=summary)


__all__ = ["SWEEPS", "ChildJobExecutor", "ForeignChild", "PlanMismatch", "SidecarSummaries", "SummarySource",
           "cancel_cr", "create_sweep", "delete_sweep", "get_cr", "list_sweeps", "no_sweep", "sweep_phase"]
