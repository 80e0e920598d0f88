"""`aiperf kube sweep`: a parameter sweep (and repeated trials) as an AIPerfSweep custom resource,
and what the other `kube` commands need to address sweeps (`--kind sweep`, `-v/--variation`,
`-t/--trial`).

The AIPerfSweep is built from the same checked deployment `kube profile` builds (so a flag
direct mode refuses is refused here): the benchmark of the flags with each swept flag at its
first value, plus `spec.sweep` (each comma list as the dotted path of its field in the benchmark,
`--concurrency 4,8` -> `phases.profiling.concurrency: [4, 8]`) and `spec.multiRun`. Before
anything is submitted it is checked against the CRD and planned with the operator's planner:
every variation must be a valid benchmark and the plan at most `--max-runs` runs, else exit 2.
A child of a sweep is the AIPerfJob `<sweep>-v<variation>-t<trial>` (`child_name`).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any, Literal

import anyio
import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from aiperf.cli.kube_commands import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USER_ERROR,
    _error,
    _open,
    build_deployment,
    guarded,
    run_async,
    write_output,
)
from aiperf.cli.kube_operator import build_job
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import ProfileFlags
from aiperf.cli.sweep_options import MultiRunFlags, sweep_parameters
from aiperf.config import ConfigError
from aiperf.kube import KubeConfigError, ops
from aiperf.kube.client import KubeClusterError, KubeError
from aiperf.kube.crd_model import API_GROUP, API_VERSION, SWEEP_KIND, AIPerfSweepSpec, decode_spec
from aiperf.kube.crd_validation import validate_resource
from aiperf.kube.sweep_executor import get_cr, plan_of, run_benchmark

CR_API_VERSION = f"{API_GROUP}/{API_VERSION}"
Kind = Literal["job", "sweep"]
FIELD_PATHS = {
    "concurrency": "phases.profiling.concurrency", "request_rate": "phases.profiling.rate",
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


def child_name(sweep: str, variation: int, trial: int) -> str:
    """The child AIPerfJob of `variation` (0-based) and `trial` (1-based) of sweep `sweep`."""
    return f"{sweep}-v{variation}-t{trial}"


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
    dataset = spec["benchmark"]["datasets"][0]["name"]
    if swept:
        spec["sweep"] = {"type": options.sweep_type,
                         "parameters": {FIELD_PATHS[f].format(dataset=dataset): v for f, v in swept.items()}}
    else:  # repeated runs of one benchmark, written as AIPerf writes them
        spec["sweep"] = {"type": "scenarios", "runs": [{"name": "base"}]}
    if options.cooldown:
        spec["sweep"]["cooldownSeconds"] = options.cooldown
    multi: dict[str, Any] = dict(options.multi_run)
    if options.trials != 1:
        multi["numRuns"] = options.trials
    if options.trial_cooldown:
        multi["cooldownSeconds"] = options.trial_cooldown
    if options.min_runs != 1:
        multi["minRuns"] = options.min_runs
    if multi:
        spec["multiRun"] = multi
    body = {"apiVersion": CR_API_VERSION, "kind": SWEEP_KIND, "metadata": job["metadata"], "spec": spec}
    problems = validate_resource(body)
    if problems:
        raise KubeConfigError("the AIPerfSweep would be rejected: " + "; ".join(map(str, problems)))
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
        api, namespace = await _open(target)
        body["metadata"]["namespace"] = namespace
        name = body["metadata"]["name"]
        async with api:
            await ops.ensure_namespace_exists(api, namespace)
            try:
                await ops._call(api, "POST", ops._path(CR_API_VERSION, "aiperfsweeps", namespace), body=body)
            except ApiException as exc:
                if exc.status == 409:
                    raise KubeError(f"an AIPerfSweep {name} already exists in {namespace}; "
                                    f"`aiperf kube delete {name} --kind sweep -n {namespace}` or pick another "
                                    "--name") from None
                if exc.status == 404:
                    raise KubeError("the cluster does not serve AIPerfSweeps: install the aiperf operator") from None
                raise KubeClusterError(f"creating AIPerfSweep {name} failed: {ops._describe(exc)}") from None
            print(f"created AIPerfSweep {namespace}/{name} ({runs} runs); the operator starts its sweep-controller")
            if detach:
                print(f"follow it with `aiperf kube list --kind sweep -n {namespace}`, cancel it with "
                      f"`aiperf kube cancel {name} --kind sweep -n {namespace}`")
                return EXIT_OK
            return await follow_sweep(api, name, namespace, poll_s=poll_s)

    return run_async(work)


async def follow_sweep(api: ApiClient, name: str, namespace: str, *, poll_s: float = 2.0) -> int:
    """Print a line per change of the sweep's phase or progress until it ends; the exit code."""
    last: tuple[Any, ...] | None = None
    t0 = time.monotonic()
    while True:
        cr = await get_cr(api, SWEEP_KIND, namespace, name)
        if cr is None:
            _error(f"AIPerfSweep {namespace}/{name} was deleted")
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
            _error(f"sweep {name} ended {line[0]}")
            return EXIT_FAILED
        await anyio.sleep(poll_s)


# -- the other commands: --kind sweep, -v/-t ---------------------------------------------------

def check_selector(kind: Kind, variation: int | None, trial: int | None) -> str | None:
    """The problem with `--kind`/`-v`/`-t` as given (None when fine)."""
    if kind == "job" and (variation is not None or trial is not None):
        return "-v/--variation and -t/--trial name a child of a sweep: add --kind sweep"
    if variation is not None and variation < 0:
        return f"-v/--variation {variation}: variations count from 0"
    if trial is not None and trial < 1:
        return f"-t/--trial {trial}: trials count from 1"
    return None


async def resolve_child(api: ApiClient, name: str, namespace: str, variation: int | None,
                        trial: int | None) -> str:
    """The child AIPerfJob of sweep `name` to act on: `-v`/`-t` (each defaulting to 0 and 1), or
    without both the sweep's current child. KubeError when there is no such sweep or child."""
    sweep = await get_cr(api, SWEEP_KIND, namespace, name)
    if sweep is None:
        raise KubeError(f"no AIPerfSweep {name} in namespace {namespace}; `aiperf kube list --kind sweep` shows them")
    if variation is None and trial is None:
        current = (sweep.get("status") or {}).get("currentChild")
        if not current:
            raise KubeError(f"sweep {name} runs no child now; name one with -v VARIATION -t TRIAL")
        return str(current)
    return child_name(name, variation or 0, trial or 1)


def cancel_sweep(target: KubeTarget, name: str) -> int:
    """`kube cancel NAME --kind sweep`: set the sweep's `spec.cancel` (UID-fenced); the operator
    and the sweep-controller cancel its current child and start no other."""

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            sweep = await get_cr(api, SWEEP_KIND, namespace, name)
            if sweep is None:
                _error(f"no AIPerfSweep {name} in namespace {namespace}")
                return EXIT_USER_ERROR
            if (sweep.get("status") or {}).get("phase") in _TERMINAL:
                print(f"sweep {name} already {sweep['status']['phase']}; nothing to cancel")
                return EXIT_OK
            await ops._call(api, "PATCH", ops._path(CR_API_VERSION, "aiperfsweeps", namespace, name), body=[
                {"op": "test", "path": "/metadata/uid", "value": sweep["metadata"]["uid"]},
                {"op": "add", "path": "/spec/cancel", "value": True}], content_type="application/json-patch+json")
        print(f"cancelled sweep {name}: spec.cancel is true on AIPerfSweep {namespace}/{name}; its current child "
              "is cancelled and no other starts")
        return EXIT_OK

    return run_async(work)


def delete_sweep(target: KubeTarget, name: str, *, uid: str | None) -> int:
    """`kube delete NAME --kind sweep`: delete the AIPerfSweep with its UID as a precondition (the
    operator cancels its children first; garbage collection removes them and its JobSet)."""

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            sweep = await get_cr(api, SWEEP_KIND, namespace, name)
            if sweep is None:
                _error(f"no AIPerfSweep {name} in namespace {namespace}")
                return EXIT_USER_ERROR
            if uid is not None and sweep["metadata"]["uid"] != uid:
                _error(f"AIPerfSweep {name} is now uid {sweep['metadata']['uid']}, not {uid}; nothing deleted")
                return EXIT_FAILED
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
                    "preconditions": {"uid": sweep["metadata"]["uid"]}}
            try:
                await ops._call(api, "DELETE", ops._path(CR_API_VERSION, "aiperfsweeps", namespace, name), body=body)
            except ApiException as exc:
                if exc.status in (404, 409):
                    _error(f"AIPerfSweep {name} was deleted or replaced meanwhile")
                    return EXIT_FAILED
                raise KubeClusterError(f"deleting AIPerfSweep {name} failed: {ops._describe(exc)}") from None
        print(f"deleted AIPerfSweep {namespace}/{name}; its children and sweep-controller go with it")
        return EXIT_OK

    return run_async(work)


def sweep_results(target: KubeTarget, name: str, *, artifact_dir: str) -> int:
    """`kube results NAME --kind sweep` (no -v/-t): the sweep aggregate. Once harvested it is on
    the operator's results volume (`status.resultsPath`, printed); before that, while the
    sweep-controller's results sidecar still holds it, it is downloaded into ARTIFACT_DIR/NAME/.
    Exit 1 while there is no aggregate yet."""
    from pathlib import Path

    from aiperf.config.markers import SWEEP_AGGREGATE_FILES
    from aiperf.kube import sidecar

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            sweep = await get_cr(api, SWEEP_KIND, namespace, name)
            if sweep is None:
                _error(f"no AIPerfSweep {name} in namespace {namespace}")
                return EXIT_USER_ERROR
            status = sweep.get("status") or {}
            if status.get("resultsAvailable"):
                print(f"sweep {name} {status.get('phase')}: aggregate stored by the operator under "
                      f"{status.get('resultsPath')} (run epoch {status.get('runEpoch')}); a child's results: "
                      f"`aiperf kube results {name} --kind sweep -v VARIATION -t TRIAL --from-pods`")
                return EXIT_OK
            if (status.get("aggregation") or {}).get("phase") != "Complete":
                _error(f"sweep {name} has no aggregate yet ({status.get('phase') or 'Pending'}, "
                       f"{status.get('completedRuns') or 0}/{status.get('totalRuns') or '?'} runs)")
                return EXIT_FAILED
            selector = f"{ops.JOBSET_NAME_LABEL}=aiperf-sweep-{name}"
            pods = (await ops._call(api, "GET", ops._path("v1", "pods", namespace),
                                    query={"labelSelector": selector})).get("items") or []
            if not pods:
                _error(f"the sweep-controller pod of {name} is gone; the operator is harvesting the aggregate")
                return EXIT_FAILED
            dest = Path(artifact_dir) / name
            dest.mkdir(parents=True, exist_ok=True)
            pod = str(pods[-1]["metadata"]["name"])
            for file_name in SWEEP_AGGREGATE_FILES:
                await sidecar.download_export(api, namespace, pod, file_name, dest)
        print(f"sweep aggregate: {dest}/ ({', '.join(SWEEP_AGGREGATE_FILES)}) from pod {pod}")
        return EXIT_OK

    return run_async(work)


def list_sweeps(target: KubeTarget, *, all_namespaces: bool) -> int:
    """`kube list --kind sweep`: NAME, STATE, RUNS (done/total), CURRENT child, AGE."""
    from aiperf.cli.kube_runs import age, now

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            scope = None if all_namespaces else namespace
            path = ops._path(CR_API_VERSION, "aiperfsweeps", scope)
            try:
                items = (await ops._call(api, "GET", path)).get("items") or []
            except ApiException as exc:
                if exc.status == 404:
                    print("no AIPerfSweeps: the cluster does not serve them (install the aiperf operator)")
                    return EXIT_OK
                raise KubeClusterError(f"listing AIPerfSweeps failed: {ops._describe(exc)}") from None
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


def resolve_name(target: KubeTarget, name: str, kind: Kind, variation: int | None, trial: int | None) -> str:
    """The run a job command acts on: `name` itself (`--kind job`), or the child of sweep `name`
    that `-v`/`-t` (else its current child) name. Raises FlagError, KubeError."""
    problem = check_selector(kind, variation, trial)
    if problem is not None:
        raise FlagError(problem)
    if kind == "job":
        return name

    async def work() -> str:
        api, namespace = await _open(target)
        async with api:
            return await resolve_child(api, name, namespace, variation, trial)

    return anyio.run(work)
