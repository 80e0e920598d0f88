"""`aiperf kube sweep`: a parameter sweep (and repeated trials) as an AIPerfSweep custom resource,
and `kube list --kind sweep`.

The AIPerfSweep is built from the same checked deployment `kube profile` builds (so a flag
direct mode refuses is refused here): the benchmark of the flags with each swept flag at its
first value, plus `spec.sweep` (each comma list as the dotted path of its field in the benchmark,
`--concurrency 4,8` -> `phases.profiling.concurrency: [4, 8]`) and `spec.multiRun`. Before
anything is submitted it is checked against the CRD and planned with the operator's planner:
every variation must be a valid benchmark and the plan at most `--max-runs` runs, else exit 2.
The other verbs act on a sweep through `aiperf.cli.kube_run_sweep.OperatorSweep`.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any, Literal

import anyio
import yaml

from aiperf.cli.kube_deploy import build_deployment
from aiperf.cli.kube_operator import build_job, rejected_if_invalid
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.kube_runs import age, now
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, error, guarded, run_async, session, write_output
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import ProfileFlags
from aiperf.cli.sweep_options import MultiRunFlags, sweep_parameters
from aiperf.config import ConfigError
from aiperf.crd.model import SWEEP_KIND, AIPerfSweepSpec, decode_spec
from aiperf.kube import KubeConfigError
from aiperf.kubeapi import KubeApi
from aiperf.kuberun import direct
from aiperf.kuberun.jobs import CR_API_VERSION
from aiperf.kuberun.sweep_plan import plan_of, run_benchmark
from aiperf.kuberun.sweeps import SWEEPS, create_sweep, get_cr
from aiperf.kuberun.sweeps import list_sweeps as list_sweeps_of

FIELD_PATHS = {
    "concurrency": "phases.profiling.concurrency", "request_rate": "phases.profiling.rate",
    "prefill_concurrency": "phases.profiling.prefill_concurrency",
    "request_count": "phases.profiling.requests", "benchmark_duration": "phases.profiling.duration",
    "isl": "datasets.{dataset}.prompts.isl.mean", "osl": "datasets.{dataset}.prompts.osl.mean",
    "num_dataset_entries": "datasets.{dataset}.entries",
}
"""Where each sweepable flag's field lives in the benchmark document (AIPerf's paths; the
dataset by its name)."""
_TERMINAL = ("Completed", "Failed", "Cancelled")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """The sweep flags of `kube sweep` (`multi_run`: more `spec.multiRun` fields, camelCase)."""

    sweep_values: list[str] | None
    sweep_type: Literal["grid", "zip"]
    cooldown: float
    trials: int
    trial_cooldown: float
    min_runs: int
    max_runs: int | None
    multi_run: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, multi: MultiRunFlags) -> SweepOptions:
        """The options of `aiperf profile`'s multi-run and sweep flags (as `kube generate` takes them)."""
        extra = {wire: value for field, wire in (("confidence_level", "confidenceLevel"),
                                                 ("set_consistent_seed", "setConsistentSeed"),
                                                 ("vary_seed_per_trial", "varySeedPerTrial"),
                                                 ("profile_run_disable_warmup_after_first", "disableWarmupAfterFirst"))
                 if (value := getattr(multi, field)) is not None}
        return cls(sweep_values=multi.sweep_values, sweep_type=multi.sweep_type or "grid",
                   cooldown=multi.parameter_sweep_cooldown_seconds or 0.0, trials=multi.num_profile_runs or 1,
                   trial_cooldown=multi.profile_run_cooldown_seconds or 0.0, min_runs=1, max_runs=None,
                   multi_run=extra)


def _sweep_block(options: SweepOptions, swept: dict[str, list[Any]], *, dataset: str) -> dict[str, Any]:
    """`spec.sweep` as AIPerf writes it: the swept flags' paths, or repeated runs of one benchmark."""
    if swept:
        block: dict[str, Any] = {"type": options.sweep_type, "parameters": {
            FIELD_PATHS[f].format(dataset=dataset): v for f, v in swept.items()}}
    else:
        block = {"type": "scenarios", "runs": [{"name": "base"}]}
    if options.cooldown:
        block["cooldownSeconds"] = options.cooldown
    return block


def _multi_run_block(options: SweepOptions) -> dict[str, Any]:
    """`spec.multiRun` (empty: one run per variation, nothing to write)."""
    multi: dict[str, Any] = dict(options.multi_run)
    if options.trials != 1:
        multi["numRuns"] = options.trials
    if options.trial_cooldown:
        multi["cooldownSeconds"] = options.trial_cooldown
    if options.min_runs != 1:
        multi["minRuns"] = options.min_runs
    return multi


def build_sweep(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags,
                options: SweepOptions) -> tuple[dict[str, Any], int]:
    """The AIPerfSweep of the flags and the number of runs it plans; raises FlagError or
    KubeConfigError (one line) for anything that would not run."""
    swept = sweep_parameters(options.sweep_values)
    if not swept and options.trials < 2:
        raise FlagError("kube sweep: give at least one comma list, e.g. --concurrency 4,8,16 (or several trials)")
    base = dataclasses.replace(flags, **{field: values[0] for field, values in swept.items()})  # type: ignore[arg-type]
    job = build_job(build_deployment(target, deploy, base), log_level=deploy.log_level)
    spec = dict(job["spec"])
    spec.pop("ttlSecondsAfterFinished", None)  # the sweep's own TTL: the operator's default
    spec["sweep"] = _sweep_block(options, swept, dataset=spec["benchmark"]["datasets"][0]["name"])
    if multi := _multi_run_block(options):
        spec["multiRun"] = multi
    body = rejected_if_invalid({"apiVersion": CR_API_VERSION, "kind": SWEEP_KIND, "metadata": job["metadata"],
                                "spec": spec})
    decoded = decode_spec(spec, SWEEP_KIND)
    assert isinstance(decoded, AIPerfSweepSpec)
    plan = plan_of(decoded)
    try:
        for run in plan.runs:
            run_benchmark(decoded, run)
    except ConfigError as exc:
        raise KubeConfigError(f"a variation is not a valid benchmark: {exc}") from None
    if options.max_runs is not None and len(plan.runs) > options.max_runs:
        raise FlagError(f"--max-runs {options.max_runs}: the sweep plans {len(plan.runs)} runs "
                        f"({len(plan.variations)} variations x {options.trials} trials); raise it or sweep less")
    return body, len(plan.runs)


def generate_sweep(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags, multi: MultiRunFlags,
                   output: str | None, *, operator: bool) -> int:
    """`kube generate` with sweep or multi-run flags: print the AIPerfSweep (operator mode only:
    the sweep-controller runs the children). Exit 2 for a mistake in the flags."""

    def work() -> int:
        if not operator:
            raise FlagError("a sweep or repeated runs on Kubernetes run through the operator: add --operator "
                            "(or use `aiperf kube sweep`)")
        body, _ = build_sweep(target, deploy, flags, SweepOptions.of(multi))
        return write_output(yaml.safe_dump(body, sort_keys=False), output)

    return guarded(work)


def sweep_command(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags, options: SweepOptions, *,
                  dry_run: bool, detach: bool, poll_s: float = 2.0) -> int:
    """`kube sweep`: print (`dry_run`), or submit the AIPerfSweep and, unless `detach`, follow it
    to its end. Exit 0 completed, 1 failed or cancelled, 2 a mistake in the flags."""
    if dry_run:
        def show() -> int:
            body, runs = build_sweep(target, deploy, flags, options)
            print(f"# {runs} runs; unseeded benchmarks get their seed from the AIPerfSweep's uid", file=sys.stderr)
            return write_output(yaml.safe_dump(body, sort_keys=False), None)
        return guarded(show)

    async def work() -> int:
        body, runs = build_sweep(target, deploy, flags, options)
        async with session(target) as (api, namespace):
            body["metadata"]["namespace"] = namespace
            name = body["metadata"]["name"]
            await direct.ensure_namespace_exists(api, namespace)
            await create_sweep(api, body)
            print(f"created AIPerfSweep {namespace}/{name} ({runs} runs); the operator starts its sweep-controller")
            if detach:
                print(f"follow it with `aiperf kube list --kind sweep -n {namespace}`, cancel it with "
                      f"`aiperf kube cancel {name} --kind sweep -n {namespace}`")
                return EXIT_OK
            return await follow_sweep(api, name, namespace, poll_s=poll_s)

    return run_async(work)


async def follow_sweep(api: KubeApi, name: str, namespace: str, *, poll_s: float = 2.0) -> int:
    """Print a line per change of the sweep's phase or progress until it ends; the exit code."""
    last: tuple[Any, ...] | None = None
    t0 = time.monotonic()
    while True:
        cr = await get_cr(api, SWEEPS, namespace, name)
        if cr is None:
            error(f"AIPerfSweep {namespace}/{name} was deleted")
            return EXIT_FAILED
        status = cr.get("status") or {}
        line = (status.get("phase") or "Submitted", status.get("completedRuns"), status.get("totalRuns"),
                status.get("currentChild"))
        if line != last:
            last = line
            current = f", running {line[3]}" if line[3] else ""
            print(f"[{time.monotonic() - t0:6.1f}s] sweep {name}: {line[0]}, {line[1] or 0}/{line[2] or '?'} runs"
                  f"{current}", flush=True)
        if line[0] in _TERMINAL:
            if line[0] == "Completed":
                print(f"aggregate stored by the operator under {status.get('resultsPath')}")
                return EXIT_OK
            error(f"sweep {name} ended {line[0]}")
            return EXIT_FAILED
        await anyio.sleep(poll_s)


def list_sweeps(target: KubeTarget, *, all_namespaces: bool) -> int:
    """`kube list --kind sweep`: NAME, STATE, RUNS (done/total), CURRENT child, AGE."""

    async def work() -> int:
        async with session(target) as (api, namespace):
            items = await list_sweeps_of(api, None if all_namespaces else namespace)
        if items is None:
            print("no AIPerfSweeps: the cluster does not serve them (install the aiperf operator)")
            return EXIT_OK
        if not items:
            print(f"no aiperf sweeps in {'any namespace' if all_namespaces else f'namespace {namespace}'}")
            return EXIT_OK
        rows = [[*(["NAMESPACE"] if all_namespaces else []), "NAME", "STATE", "RUNS", "CURRENT", "AGE"]]
        for item in sorted(items, key=lambda i: (i["metadata"]["namespace"], i["metadata"]["name"])):
            meta, status = item["metadata"], item.get("status") or {}
            done = int(status.get("completedRuns") or 0) + int(status.get("failedRuns") or 0)
            rows.append([*([meta["namespace"]] if all_namespaces else []), meta["name"],
                         status.get("phase") or "Pending", f"{done}/{status.get('totalRuns', '?')}",
                         status.get("currentChild") or "-", age(meta.get("creationTimestamp"), now())])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        return EXIT_OK

    return run_async(work)
