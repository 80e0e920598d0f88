"""The cluster side of the one sweep planner (`aiperf.config.sweep`): an AIPerfSweep's plan, each
planned run's child AIPerfJob, and the executor that runs one (`ChildJobExecutor`).

- `plan_for(spec, uid)`: the plan a local sweep of the same benchmark would run. A benchmark
  without `random_seed` gets one derived from the CR's immutable UID (`uid_seed`), so a
  restarted sweep-controller replans exactly the same runs with the same seeds, while two sweeps
  still differ. `plan_of(spec)` is the same plan seeded like a local run (42 when unset).
- `child_name(sweep, run)`: `<sweep>-v<variation>-t<trial>`, deterministic: a restarted
  sweep-controller finds the children it already created by name.
- `child_body(sweep_cr, run, benchmark)`: the child AIPerfJob: the sweep's deployment envelope
  (image, pod template with its Secret references, ...), the run's benchmark (canonical form),
  `childMetadata`'s labels and annotations, labels naming the sweep, variation and trial, a controller owner reference to the sweep (name and UID), the annotation that
  keeps the child's results sidecar up until the sweep-controller has read its summary, and
  `RUN_DIGEST_ANNOTATION`: `run_digest(benchmark)`, what the child was planned to run.
- `ChildJobExecutor.execute(run, benchmark)`: the cluster `AsyncRunExecutor`: create the child
  (or adopt the one this sweep already owns, only when its run digest is the one planned now:
  `PlanMismatch` otherwise), poll it until it ends, read its summary, and cancel it when the
  sweep is cancelled or gone meanwhile.
- `plan_digest(digests)`: one digest of a whole plan (the run digests in order), which the
  sweep-controller records in `status.aggregation.planDigest` and checks after a restart.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.config import Benchmark, PhaseKind, decode_benchmark
from aiperf.config.sweep import (
    MultiRun,
    Plan,
    PlannedRun,
    RunOutcome,
    SweepType,
    Variation,
    apply_values,
    build_plan,
    sweep_variations,
)
from aiperf.config.templating import render_document
from aiperf.kube import sidecar
from aiperf.kube.client import KubeClusterError, KubeError
from aiperf.kube.crd_model import API_GROUP, API_VERSION, JOB_KIND, SWEEP_KIND, AIPerfSweepSpec, JobPhase
from aiperf.kube.ops import _call, _describe, _path, leaving

__all__ = [
    "CHILD_FIELDS", "CR_API_VERSION", "EXIT_CANCELLED", "SUMMARY_FILE", "SWEEP_LABEL", "TRIAL_LABEL", "VARIATION_LABEL",
    "RUN_DIGEST_ANNOTATION", "ChildJobExecutor", "ForeignChild", "PlanMismatch", "SidecarSummaries", "SummarySource",
    "benchmark_of", "cancel_child", "child_body", "child_name", "get_cr", "is_owned_by", "plan_digest", "plan_for",
    "plan_of", "run_benchmark", "run_digest", "uid_seed",
]

Obj = dict[str, Any]
log = structlog.get_logger("aiperf.kube.sweep")
CR_API_VERSION = f"{API_GROUP}/{API_VERSION}"
SWEEP_LABEL = f"{API_GROUP}/sweep"
VARIATION_LABEL = f"{API_GROUP}/variation"
TRIAL_LABEL = f"{API_GROUP}/trial"
RUN_DIGEST_ANNOTATION = f"{API_GROUP}/run-digest"
SUMMARY_FILE = "profile_export_aiperf.json"
EXIT_CANCELLED = 130
"""The exit code of a run cut short because the sweep was cancelled (it ends the plan)."""
CHILD_FIELDS = ("image", "imagePullPolicy", "resourceMode", "connectionsPerWorker", "podTemplate",
                "timeoutSeconds", "keepFailedPods", "skipEndpointCheck")
"""The sweep's envelope fields every child AIPerfJob gets as they are."""
_TERMINAL = frozenset({JobPhase.COMPLETED.value, JobPhase.FAILED.value, JobPhase.CANCELLED.value})


def uid_seed(uid: str) -> int:
    """A seed from a CR's UID: stable for one CR, different between CRs (31 bits)."""
    return int.from_bytes(hashlib.sha256(uid.encode()).digest()[:4], "big") & 0x7FFFFFFF


def _plan(spec: AIPerfSweepSpec, seed: int | None) -> Plan:
    multi = spec.multi_run
    multi_run = MultiRun(num_runs=multi.num_runs, cooldown_seconds=multi.cooldown_seconds,
                         confidence_level=multi.confidence_level, set_consistent_seed=multi.set_consistent_seed,
                         vary_seed_per_trial=multi.vary_seed_per_trial,
                         disable_warmup_after_first=multi.disable_warmup_after_first) if multi else MultiRun()
    sweep = spec.sweep
    planned = sweep_variations(sweep)
    if sweep.type is SweepType.SCENARIOS and len(planned) == 1 and not planned[0].overlay:
        planned = []  # AIPerf's form of repeated runs of one benchmark: no variation of its own
    return build_plan(variations=planned, multi_run=multi_run, sweep_cooldown_s=sweep.cooldown_seconds,
                      sweep_type=sweep.type, seed=seed, same_seed=sweep.same_seed)


def plan_of(spec: AIPerfSweepSpec) -> Plan:
    """The runs of the sweep `spec`: its variations times `multiRun.numRuns` trials, with its
    cooldowns, seeded from `benchmark.random_seed` (42 when unset, as a local run)."""
    return _plan(spec, spec.benchmark.random_seed)


def plan_for(spec: AIPerfSweepSpec, uid: str) -> Plan:
    """The plan of the AIPerfSweep with UID `uid`: `plan_of`, but an unseeded benchmark is seeded
    with `uid_seed(uid)` (the same plan after every restart of the sweep-controller)."""
    seed = spec.benchmark.random_seed
    return _plan(spec, seed if seed is not None else uid_seed(uid))


def benchmark_of(spec: AIPerfSweepSpec, variation: Variation) -> Benchmark:
    """`spec.benchmark` with the variation's values set; raises `aiperf.config.ConfigError`
    naming the variation when the result is not a valid benchmark."""
    return decode_benchmark(apply_values(msgspec.to_builtins(spec.benchmark), variation.values, variation.overlay),
                            source=variation.label)


def run_benchmark(spec: AIPerfSweepSpec, run: PlannedRun) -> Benchmark:
    """The benchmark of one planned run: its variation's, with the run's seed, without the
    warmup phase when the plan says so. Raises `aiperf.config.ConfigError`."""
    base = benchmark_of(spec, run.variation) if run.variation is not None else spec.benchmark
    phases = base.phases if run.warmup else [p for p in base.phases if p.role is not PhaseKind.WARMUP]
    return msgspec.structs.replace(base, phases=phases, random_seed=run.seed)


def run_digest(benchmark: Benchmark) -> str:
    """A digest of what one run does: SHA-256 (first 16 hex digits) of its benchmark as JSON
    with sorted keys; equal benchmarks give equal digests in every process."""
    encoded = msgspec.json.encode(msgspec.to_builtins(benchmark), order="sorted")
    return hashlib.sha256(encoded).hexdigest()[:16]


def plan_digest(run_digests: list[str]) -> str:
    """A digest of a whole plan from its runs' `run_digest`s, in plan order."""
    return hashlib.sha256(",".join(run_digests).encode()).hexdigest()[:16]


def child_name(sweep: str, run: PlannedRun) -> str:
    """`<sweep>-v<variation index>-t<trial>` (v0 without a sweep block)."""
    index = run.variation.index if run.variation is not None else 0
    return f"{sweep}-v{index}-t{run.trial}"


def child_body(sweep_cr: Mapping[str, Any], run: PlannedRun, benchmark: Benchmark) -> Obj:
    """The child AIPerfJob of `run` of the sweep `sweep_cr` (see the module doc)."""
    meta = sweep_cr["metadata"]
    spec = render_document(sweep_cr.get("spec") or {}, os.environ)
    index = run.variation.index if run.variation is not None else 0
    extra = spec.get("childMetadata") or {}
    annotations = {**(extra.get("annotations") or {}), sidecar.KEEP_SIDECAR_ANNOTATION: "true",
                   RUN_DIGEST_ANNOTATION: run_digest(benchmark)}
    if run.variation is not None:
        annotations[f"{API_GROUP}/variation-label"] = run.variation.label
    return {
        "apiVersion": CR_API_VERSION, "kind": JOB_KIND,
        "metadata": {
            "name": child_name(meta["name"], run), "namespace": meta["namespace"],
            "labels": {**(extra.get("labels") or {}), SWEEP_LABEL: meta["name"], VARIATION_LABEL: str(index),
                       TRIAL_LABEL: str(run.trial), "app.kubernetes.io/name": "aiperf"},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": CR_API_VERSION, "kind": SWEEP_KIND, "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {**{k: spec[k] for k in CHILD_FIELDS if k in spec}, "benchmark": msgspec.to_builtins(benchmark)},
    }


def is_owned_by(obj: Mapping[str, Any], sweep_name: str, sweep_uid: str) -> bool:
    """True when `obj`'s controller owner is exactly the AIPerfSweep `sweep_name` with `sweep_uid`
    (labels never decide ownership)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == SWEEP_KIND and ref.get("name") == sweep_name \
                and ref.get("uid") == sweep_uid and str(ref.get("apiVersion", "")).startswith(f"{API_GROUP}/"):
            return True
    return False


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


class SidecarSummaries:
    """Summaries read from each child's results sidecar (through the API server's pod proxy),
    kept in `cache_dir/<child>.json` so a restarted container does not need the sidecar again;
    the sidecar is retired once read."""

    def __init__(self, *, api: ApiClient, cache_dir: Path) -> None:
        self._api, self._cache = api, cache_dir

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
                return None
            try:
                await sidecar.shutdown_sidecar(self._api, meta["namespace"], pod)
            except KubeClusterError as exc:  # it exits by itself after its linger time
                log.warning("sweep.sidecar_shutdown_failed", child=meta["name"], error=str(exc))
        try:
            doc = json.loads(await anyio.Path(cached).read_bytes())
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None


async def get_cr(api: ApiClient, kind: str, namespace: str, name: str) -> Obj | None:
    """The AIPerfJob or AIPerfSweep `namespace/name`, None when absent."""
    plural = "aiperfjobs" if kind == JOB_KIND else "aiperfsweeps"
    try:
        found: Obj = await _call(api, "GET", _path(CR_API_VERSION, plural, namespace, name))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise KubeClusterError(f"reading {kind} {namespace}/{name} failed: {_describe(exc)}") from None
    return found


async def cancel_child(api: ApiClient, child: Mapping[str, Any]) -> bool:
    """Set `spec.cancel` on `child`, fenced on its UID; False when it is gone or replaced."""
    meta = child["metadata"]
    ops = [{"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
           {"op": "add", "path": "/spec/cancel", "value": True}]
    try:
        await _call(api, "PATCH", _path(CR_API_VERSION, "aiperfjobs", meta["namespace"], meta["name"]), body=ops,
                    content_type="application/json-patch+json")
    except ApiException as exc:
        if exc.status in (404, 409, 422):
            return False
        raise KubeClusterError(f"cancelling AIPerfJob {meta['name']} failed: {_describe(exc)}") from None
    return True


class ChildJobExecutor:
    """Runs planned runs of the AIPerfSweep `sweep_cr` (as read at start) as its child AIPerfJobs,
    one at a time (see the module doc). `poll_s`: seconds between reads of the child and the
    sweep while a run goes on."""

    def __init__(self, *, api: ApiClient, sweep_cr: Mapping[str, Any], summaries: SummarySource,
                 poll_s: float = 2.0) -> None:
        self._api, self._sweep, self._summaries, self._poll_s = api, sweep_cr, summaries, poll_s
        meta = sweep_cr["metadata"]
        self._ns, self._name, self._uid = meta["namespace"], meta["name"], meta["uid"]

    async def existing(self, run: PlannedRun) -> Obj | None:
        """The child of `run` when it exists and is this sweep's; ForeignChild when another
        object holds its name."""
        child = await get_cr(self._api, JOB_KIND, self._ns, child_name(self._name, run))
        if child is not None and not is_owned_by(child, self._name, self._uid):
            raise ForeignChild(f"AIPerfJob {self._ns}/{child['metadata']['name']} exists but is not a child of "
                               f"AIPerfSweep {self._name} (uid {self._uid}); delete it or rename the sweep")
        return child

    async def sweep_cancelled(self) -> bool:
        """True when the sweep asks to stop: `spec.cancel`, or it is being deleted (its
        finalizer not yet released), gone or replaced."""
        live = await get_cr(self._api, SWEEP_KIND, self._ns, self._name)
        return leaving(live, self._uid) or ((live or {}).get("spec") or {}).get("cancel") is True

    def _adopt(self, child: Mapping[str, Any], digest: str) -> None:
        """Adopt `child` (created by an earlier incarnation) when it runs what is planned now."""
        found = (child["metadata"].get("annotations") or {}).get(RUN_DIGEST_ANNOTATION)
        if found != digest:
            raise PlanMismatch(f"AIPerfJob {self._ns}/{child['metadata']['name']} was created from another plan "
                               f"(run digest {found}, replanned {digest}); not adopting it")
        log.info("sweep.child_adopted", sweep=self._name, child=child["metadata"]["name"], digest=digest)

    async def execute(self, run: PlannedRun, benchmark: Benchmark) -> RunOutcome:
        """Run `run` as a child AIPerfJob and wait for its end: exit 0 with its summary when it
        completed, 1 when it failed (or left no summary), `EXIT_CANCELLED` when the sweep was
        cancelled meanwhile (the child is cancelled too). Raises ForeignChild, PlanMismatch,
        KubeClusterError."""
        digest = run_digest(benchmark)
        child = await self.existing(run)
        if child is None:
            body = child_body(self._sweep, run, benchmark)
            try:
                child = await _call(self._api, "POST", _path(CR_API_VERSION, "aiperfjobs", self._ns), body=body)
                log.info("sweep.child_created", sweep=self._name, child=body["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 409:
                    raise KubeClusterError(f"creating AIPerfJob {body['metadata']['name']} failed: "
                                           f"{_describe(exc)}") from None
                child = await self.existing(run)  # created by an earlier incarnation meanwhile
                if child is None:
                    raise KubeClusterError(f"AIPerfJob {body['metadata']['name']} was being replaced") from None
                self._adopt(child, digest)
        else:
            self._adopt(child, digest)
        assert child is not None
        while (phase := (child.get("status") or {}).get("phase")) not in _TERMINAL:
            if await self.sweep_cancelled():
                await cancel_child(self._api, child)
                return RunOutcome(exit_code=EXIT_CANCELLED, summary=None)
            await anyio.sleep(self._poll_s)
            child = await self.existing(run)
            if child is None:  # deleted under us: the run is lost
                return RunOutcome(exit_code=1, summary=None)
        if phase != JobPhase.COMPLETED.value:
            return RunOutcome(exit_code=1, summary=None)
        summary = await self._summaries.fetch(child)
        return RunOutcome(exit_code=0 if summary is not None else 1, summary=summary)
