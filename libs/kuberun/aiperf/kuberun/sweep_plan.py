"""The cluster side of the one sweep planner (`aiperf.config.sweep`), pure: an AIPerfSweep's
plan and each planned run's child AIPerfJob (no API calls; `aiperf.kuberun.sweeps` runs them).

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
- `plan_digest(digests)`: one digest of a whole plan (the run digests in order), which the
  sweep-controller records in `status.aggregation.planDigest` and checks after a restart.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

import msgspec

from aiperf.config import Benchmark, PhaseKind, decode_benchmark
from aiperf.config.sweep import (
    MultiRun,
    Plan,
    PlannedRun,
    SweepType,
    Variation,
    apply_values,
    build_plan,
    sweep_variations,
)
from aiperf.config.templating import render_document
from aiperf.crd.model import API_GROUP, JOB_KIND, SWEEP_KIND, AIPerfSweepSpec
from aiperf.kube.names import KEEP_SIDECAR_ANNOTATION
from aiperf.kubeapi import Obj
from aiperf.kuberun.jobs import CR_API_VERSION

__all__ = [
    "CHILD_FIELDS", "EXIT_CANCELLED", "RUN_DIGEST_ANNOTATION", "SUMMARY_FILE", "SWEEP_LABEL", "TRIAL_LABEL",
    "VARIATION_LABEL", "benchmark_of", "child_body", "child_job_name", "child_name", "is_owned_by", "plan_digest", "plan_for",
    "plan_of", "run_benchmark", "run_digest", "uid_seed",
]

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
    return child_job_name(sweep, run.variation.index if run.variation is not None else 0, run.trial)


def child_job_name(sweep: str, variation: int, trial: int) -> str:
    """The child AIPerfJob of `variation` (0-based) and `trial` (1-based) of sweep `sweep`."""
    return f"{sweep}-v{variation}-t{trial}"


def child_body(sweep_cr: Mapping[str, Any], run: PlannedRun, benchmark: Benchmark) -> Obj:
    """The child AIPerfJob of `run` of the sweep `sweep_cr` (see the module doc)."""
    meta = sweep_cr["metadata"]
    spec = render_document(sweep_cr.get("spec") or {}, os.environ)
    index = run.variation.index if run.variation is not None else 0
    extra = spec.get("childMetadata") or {}
    annotations = {**(extra.get("annotations") or {}), KEEP_SIDECAR_ANNOTATION: "true",
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
