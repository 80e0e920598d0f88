"""The sweep-controller: runs one AIPerfSweep's plan as child AIPerfJobs, then its aggregate.

`SweepController.run()`:
1. reads the sweep (gone or replaced: nothing to do), decodes its spec and plans it with
   `aiperf.kuberun.sweep_plan.plan_for` (the planner local sweeps use; an unseeded benchmark is
   seeded from the CR's UID, so a restarted sweep-controller plans the same runs);
2. builds every run's benchmark first: an invalid variation fails the sweep before any child;
   the plan's digest (`plan_digest` of every run's `run_digest`) goes into
   `status.aggregation.planDigest`; a restarted sweep-controller whose plan has another digest
   than the recorded one fails the sweep (exit 2) instead of mixing two plans' runs;
3. runs the plan in order through `ChildJobExecutor` (one child at a time, each pause of the
   plan before a child it has not created yet). A child that already exists (a restart) is
   adopted when its run digest is the planned one, never created twice: names are
   deterministic;
4. after the last run, writes every variation's aggregate and the sweep aggregate
   (`aiperf.metrics.multirun`, as a local sweep does) into `artifact_dir` as
   `SWEEP_AGGREGATE_FILES`, then the end marker (its results sidecar then serves them), then
   sets `status.aggregation` to `Complete`: the operator harvests the files from the sidecar.

A failed child stops the sweep when its `failurePolicy` says so (`onChildFailure: abort`, or
`maxFailures` failed runs): the sweep fails (aggregation Failed). A cancelled sweep
(`spec.cancel`, or the CR gone) stops after cancelling the current child; no aggregate is written. Exit codes: 0 (done or cancelled), 2 (the spec cannot be planned, or was replanned
differently; status `aggregation.phase` Failed says why), 1 (the cluster failed us; the Job's restart retries).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog

from aiperf.config import ConfigError
from aiperf.config.markers import END_MARKER, SWEEP_AGGREGATE_FILES
from aiperf.config.sweep import Plan, RunOutcome
from aiperf.crd.model import SWEEP_KIND, AggregationPhase, AIPerfSweepSpec, decode_spec
from aiperf.kubeapi import ApiError, KubeApi, KubeClusterError, Obj, fenced, uid_of
from aiperf.kuberun.sweep_plan import (
    EXIT_CANCELLED,
    child_name,
    plan_digest,
    plan_for,
    run_benchmark,
    run_digest,
)
from aiperf.kuberun.sweeps import SWEEPS, ChildJobExecutor, PlanMismatch, SummarySource, get_cr
from aiperf.metrics.atomic import write_atomic
from aiperf.metrics.multirun import aggregate_runs, sweep_csv, sweep_document

log = structlog.get_logger("aiperf.sweep_controller")
AGGREGATE_JSON, SWEEP_JSON, SWEEP_CSV = SWEEP_AGGREGATE_FILES
EXIT_OK, EXIT_FAILED, EXIT_BAD_SPEC = 0, 1, 2


class SweepController:
    """Runs AIPerfSweep `namespace/name` (only while it has `uid`) through `api`. `artifact_dir`:
    where the aggregate goes (the pod's emptyDir its results sidecar serves); `summaries`: where
    finished children's summaries come from; `sleep`: the cooldown wait (injected for tests)."""

    def __init__(self, *, api: KubeApi, namespace: str, name: str, uid: str, artifact_dir: Path,
                 summaries: SummarySource, poll_s: float = 2.0,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        self._api, self._ns, self._name, self._uid = api, namespace, name, uid
        self._dir, self._summaries, self._poll_s, self._sleep = artifact_dir, summaries, poll_s, sleep
        self._digest: str | None = None

    async def plan(self) -> tuple[Obj, AIPerfSweepSpec, Plan] | None:
        """The live sweep, its spec and its plan; None when the sweep is gone or replaced.
        Raises ConfigError for a spec that cannot be planned."""
        sweep = await get_cr(self._api, SWEEPS, self._ns, self._name)
        if sweep is None or uid_of(sweep) != self._uid:
            return None
        spec = decode_spec(sweep.get("spec") or {}, SWEEP_KIND)
        assert isinstance(spec, AIPerfSweepSpec)
        return sweep, spec, plan_for(spec, self._uid)

    async def run(self) -> int:
        """Run the sweep to its end (see the module doc); returns the exit code."""
        try:
            planned = await self.plan()
            if planned is None:
                log.info("sweep.gone", namespace=self._ns, name=self._name)
                return EXIT_OK
            sweep, spec, plan = planned
            benchmarks = {r.artifact_subdir: run_benchmark(spec, r) for r in plan.runs}
        except ConfigError as exc:
            return await self._fail(str(exc))
        self._digest = plan_digest([run_digest(benchmarks[r.artifact_subdir]) for r in plan.runs])
        recorded = ((sweep.get("status") or {}).get("aggregation") or {}).get("planDigest")
        if recorded is not None and recorded != self._digest:
            return await self._fail(f"the sweep was replanned differently after a restart (plan digest "
                                    f"{self._digest}, recorded {recorded}); its runs would mix two plans")
        executor = ChildJobExecutor(api=self._api, sweep_cr=sweep, summaries=self._summaries, poll_s=self._poll_s)
        await self._set_aggregation(AggregationPhase.RUNNING, message=f"{len(plan.runs)} runs planned")
        outcomes: dict[str, RunOutcome] = {}
        policy = spec.envelope.failure_policy
        for run in plan.runs:
            if await executor.sweep_cancelled():
                return self._stopped()
            if run.cooldown_s > 0 and outcomes and await executor.existing(run) is None:
                await self._sleep(run.cooldown_s)
                if await executor.sweep_cancelled():
                    return self._stopped()
            try:
                outcome = await executor.execute(run, benchmarks[run.artifact_subdir])
            except PlanMismatch as exc:
                return await self._fail(str(exc))
            log.info("sweep.run_done", name=self._name, child=child_name(self._name, run), exit_code=outcome.exit_code)
            if outcome.exit_code == EXIT_CANCELLED:
                return self._stopped()
            outcomes[run.artifact_subdir] = outcome
            failed_runs = sum(o.exit_code != 0 for o in outcomes.values())
            if outcome.exit_code != 0 and policy is not None and (
                    policy.on_child_failure == "abort" or 0 < policy.max_failures <= failed_runs):
                return await self._fail(f"failurePolicy: run {child_name(self._name, run)} failed "
                                        f"({failed_runs} failed run(s)); the sweep stops")
        min_runs = spec.multi_run.min_runs if spec.multi_run else 1
        files, failed = await anyio.to_thread.run_sync(self._write_aggregate, plan, outcomes, min_runs)
        message = (f"variations below minRuns {min_runs}: {', '.join(failed)}" if failed
                   else f"{len(plan.variations)} variations aggregated")
        await self._set_aggregation(AggregationPhase.COMPLETE, message=message, files=files, failed=failed)
        log.info("sweep.aggregated", name=self._name, files=files, failed=failed)
        return EXIT_OK

    async def _fail(self, problem: str) -> int:
        """The sweep cannot run as specified: `status.aggregation` Failed with `problem`; exit 2."""
        await self._set_aggregation(AggregationPhase.FAILED, message=problem)
        log.error("sweep.invalid", name=self._name, error=problem)
        return EXIT_BAD_SPEC

    def _stopped(self) -> int:
        log.info("sweep.cancelled", name=self._name)
        self._end_marker(state="cancelled", exit_code=EXIT_OK)
        return EXIT_OK

    def _write_aggregate(self, plan: Plan, outcomes: Mapping[str, RunOutcome],
                         min_runs: int) -> tuple[list[str], list[str]]:
        """Write `SWEEP_AGGREGATE_FILES` and the end marker; (file names, variations below
        `min_runs` successful trials)."""
        confidence = plan.multi_run.confidence_level
        combos: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        per_variation: dict[str, Any] = {}
        failed: list[str] = []
        for variation in plan.variations:
            doc = aggregate_runs([outcomes[r.artifact_subdir].summary for r in plan.runs_of(variation)],
                                 confidence=confidence)
            per_variation[variation.label] = doc
            combos.append((variation.label, dict(variation.values), doc))
            if doc["num_successful_runs"] < min_runs:
                failed.append(variation.label)
        sweep = sweep_document(combos, sweep_type=str(plan.sweep_type))
        children = [{"name": child_name(self._name, r), "trial": r.trial,
                     "variation": r.variation.label if r.variation is not None else None,
                     "seed": r.seed, "exit_code": outcomes[r.artifact_subdir].exit_code} for r in plan.runs]
        aggregate = {"schema_version": "1.0", "sweep": self._name, "uid": self._uid, "min_runs": min_runs,
                     "failed_variations": failed, "sweep_aggregate": sweep, "variations": per_variation,
                     "children": children}
        self._dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self._dir / AGGREGATE_JSON, json.dumps(aggregate, indent=2).encode() + b"\n")
        write_atomic(self._dir / SWEEP_JSON, json.dumps(sweep, indent=2).encode() + b"\n")
        write_atomic(self._dir / SWEEP_CSV, sweep_csv(sweep).encode())
        self._end_marker(state="done", exit_code=EXIT_OK)
        return list(SWEEP_AGGREGATE_FILES), failed

    def _end_marker(self, *, state: str, exit_code: int) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self._dir / END_MARKER, json.dumps({"state": state, "exit_code": exit_code,
                                                         "reason": f"sweep {state}"}).encode())

    async def _set_aggregation(self, phase: AggregationPhase, *, message: str, files: list[str] | None = None,
                               failed: list[str] | None = None) -> None:
        """Write `status.aggregation`, fenced on the sweep's UID (a replaced sweep is never written)."""
        value: Obj = {"phase": phase.value, "message": message}
        if self._digest is not None:
            value["planDigest"] = self._digest
        if files is not None:
            value["files"] = files
        if failed:
            value["failedVariations"] = failed
        for _ in range(5):
            live = await get_cr(self._api, SWEEPS, self._ns, self._name)
            if live is None or uid_of(live) != self._uid:
                return
            ops = fenced(self._uid, *([{"op": "add", "path": "/status", "value": {}}] if live.get("status") is None
                                      else []), {"op": "add", "path": "/status/aggregation", "value": value})
            try:
                await self._api.patch(SWEEPS, self._ns, self._name, ops, status=True)
                return
            except ApiError as exc:
                if exc.status not in (409, 422):
                    raise KubeClusterError(f"writing status.aggregation of {self._name} failed: "
                                           f"{exc.describe()}") from None
                log.debug("sweep.status_lost_race", name=self._name)
        raise KubeClusterError(f"status of AIPerfSweep {self._name} kept changing; giving up this write")


__all__ = ["EXIT_BAD_SPEC", "EXIT_FAILED", "EXIT_OK", "SweepController"]
