"""What the `aiperf kube` commands do (the flags are declared in `aiperf.cli.kube_app`).

Every command returns its exit code: 0 done, 1 the cluster or the run failed, 2 a user mistake
(bad flag, missing namespace or kubeconfig, a secret without a Secret mapping). Errors are one
line on stderr, `error: <message>`; tracebacks are for our bugs only. Commands that talk to the
API server run their own event loop (`anyio.run`), so they block until done.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
from kubernetes_asyncio.client import ApiClient

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.kube_flags import parse_list, parse_mapping, parse_resources, parse_tolerations
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.comms import CurveKeys
from aiperf.config import (
    Benchmark,
    CommsOptions,
    ConfigError,
    FileDataset,
    HttpOptions,
    MetricsOptions,
    RunConfig,
    RuntimeOptions,
)
from aiperf.kube import (
    ContainerResources,
    KubeConfigError,
    KubeSettings,
    build_all,
    jobs,
    ops,
    secret_values_from_env,
    sidecar,
    to_yaml,
    with_curve_keys,
)
from aiperf.kube.client import (
    KubeClusterError,
    KubeError,
    context_namespace,
    load_client,
    resolve_namespace,
)
from aiperf.kube.containers import CONTROL_PLANE_CONTAINER
from aiperf.kube.names import jobset_name
from aiperf.kube.settings import derived_total_workers
from aiperf.results.keys import is_key

EXIT_OK, EXIT_FAILED, EXIT_USER_ERROR = 0, 1, 2
DEFAULT_LOG_CONTAINER = CONTROL_PLANE_CONTAINER
DEFAULT_IMAGE_PARTS = (KubeDeployFlags.image_registry, KubeDeployFlags.image_tag)
"""--image-registry and --image-tag when not given."""


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def guarded(work: Callable[[], int]) -> int:
    """Run `work` and map the errors of a kube command to one line and an exit code: FlagError,
    ConfigError, KubeConfigError and KubeError exit 2; KubeClusterError exits 1. Other exceptions
    propagate (they are bugs, and keep their traceback)."""
    try:
        return work()
    except KubeClusterError as exc:
        _error(str(exc))
        return EXIT_FAILED
    except (FlagError, ConfigError, KubeConfigError, KubeError) as exc:
        _error(str(exc))
        return EXIT_USER_ERROR


def run_async(work: Callable[[], Awaitable[int]]) -> int:
    """`guarded(anyio.run(work))`: a command body that talks to the API server."""
    return guarded(lambda: anyio.run(work))


# -- manifests ---------------------------------------------------------------------------------

def offline_namespace(target: KubeTarget) -> str:
    """The namespace without asking the API server: --namespace, else the kubeconfig context's
    namespace, else `default`. A missing kubeconfig only matters when --kubeconfig names it."""
    if target.namespace:
        return target.namespace
    try:
        return context_namespace(target.kubeconfig, target.kube_context) or "default"
    except KubeError:
        if target.kubeconfig is not None or target.kube_context is not None:
            raise
        return "default"


PULL_POLICIES: dict[str, Literal["Always", "IfNotPresent", "Never"]] = {
    "always": "Always", "ifnotpresent": "IfNotPresent", "never": "Never"}
"""`--image-pull-policy` values (any case, AIPerf's `if-not-present` too) -> Kubernetes' names."""


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """One run ready to create: its settings, benchmark, objects (creation order) and their YAML."""

    settings: KubeSettings
    benchmark: Benchmark
    objects: list[dict[str, Any]]
    yaml: str


def _settings(target: KubeTarget, deploy: KubeDeployFlags, resources: dict[str, ContainerResources], *,
              require_api_key: bool, benchmark: Benchmark) -> KubeSettings:
    """KubeSettings from the flags: FlagError for a malformed value (or --image beside
    --image-registry/--image-tag), KubeConfigError for an invalid one. Without --total-workers,
    the run gets AIPerf's count for `benchmark` (`derived_total_workers`)."""
    if deploy.image is not None and (deploy.image_registry, deploy.image_tag) != DEFAULT_IMAGE_PARTS:
        raise FlagError("--image names the one image of every container; leave out --image-registry/--image-tag "
                        "(they build per-service image names)")
    policy = PULL_POLICIES.get(deploy.image_pull_policy.replace("-", "").lower())
    if policy is None:
        raise FlagError(f"--image-pull-policy {deploy.image_pull_policy}: expected Always, IfNotPresent or Never")
    return KubeSettings(
        name=deploy.name, namespace=offline_namespace(target), image_registry=deploy.image_registry,
        image_tag=deploy.image_tag, image=deploy.image, image_pull_policy=policy,
        total_workers=deploy.total_workers or derived_total_workers(
            peak_concurrency=max((p.concurrency or 1 for p in benchmark.phases), default=1),
            workers_per_pod=deploy.workers_per_pod, workers_min=benchmark.runtime.workers_min),
        workers_per_pod=deploy.workers_per_pod,
        record_processors_per_pod=deploy.record_processors_per_pod, resources=resources,
        env_vars=parse_mapping("--env-vars", deploy.env_vars),
        env_from_secrets=parse_mapping("--env-from-secrets", deploy.env_from_secrets),
        labels=parse_mapping("--labels", deploy.labels),
        annotations=parse_mapping("--annotations", deploy.annotations),
        node_selector=parse_mapping("--node-selector", deploy.node_selector),
        tolerations=parse_tolerations(deploy.tolerations),
        image_pull_secrets=parse_list("--image-pull-secrets", deploy.image_pull_secrets),
        ttl_seconds=deploy.ttl_seconds, service_account=deploy.service_account,
        api_key_secret=deploy.api_key_secret, headers_secret=deploy.headers_secret,
        require_api_key=require_api_key,
    )


def build_deployment(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags) -> Deployment:
    """The manifests of run `deploy.name` (what `kube generate` prints). Pure: reads the
    kubeconfig only to learn the default namespace, and the environment for secret values that
    must not leak. Deterministic for equal input.

    Raises ConfigError (bad flag, invalid benchmark), FlagError (bad deployment flag),
    KubeConfigError (invalid deployment, a secret without a Secret mapping, a secret value in the
    manifests), KubeError (unreadable kubeconfig).
    """
    built = build_benchmark(flags, LocalFlags(ui="none"))
    dataset = built.benchmark.dataset
    if isinstance(dataset, FileDataset) and dataset.path is not None:
        raise ConfigError(f"--input-file {dataset.path}: not supported with aiperf kube yet (the file "
                          "would have to be in every pod); use a synthetic dataset or inline records")
    secrets = built.secrets
    try:
        resources = {k: msgspec.convert(v, ContainerResources)
                     for k, v in parse_resources(deploy.resources).items()}
    except msgspec.ValidationError as exc:
        raise FlagError(f"--resources: {exc}") from None
    try:
        settings = _settings(target, deploy, resources, require_api_key=secrets.api_key is not None,
                             benchmark=built.benchmark)
    except KubeConfigError as exc:
        raise KubeConfigError(_flag_names(str(exc))) from None
    # t0 stays 0 and the run id is the name: equal flags give byte-equal manifests.
    run_config = RunConfig(run_id=deploy.name, mode="profile", artifact_dir="artifacts",
                           comms=CommsOptions(ipc_dir="/aiperf/ipc"), benchmark=built.benchmark,
                           runtime=RuntimeOptions(log_level=deploy.log_level),
                           metrics=MetricsOptions.from_env(os.environ), http=HttpOptions.from_env(os.environ))
    known = [*secrets.headers.values(), *([secrets.api_key] if secrets.api_key else []),
             *secret_values_from_env(os.environ)]
    try:
        objects = build_all(settings, run_config, known_secrets=known)
    except KubeConfigError as exc:
        raise KubeConfigError(_flag_names(str(exc))) from None
    return Deployment(settings=settings, benchmark=built.benchmark, objects=objects, yaml=to_yaml(objects))


_SETTINGS_FIELDS = ("record_processors_per_pod", "image_pull_secrets", "env_from_secrets", "api_key_secret",
                    "headers_secret", "service_account", "workers_per_pod", "total_workers", "ttl_seconds",
                    "image_tag", "image", "namespace", "resources", "env_vars", "labels", "name")
_SECRET_FIELDS = ("api_key_secret", "headers_secret", "env_from_secrets")


def _flag_names(message: str) -> str:
    """libs/kube names KubeSettings fields (`total_workers 0: ...`); on the command line they are
    flags (`--total-workers 0: ...`)."""
    for field in _SETTINGS_FIELDS:
        if message.startswith(f"{field} "):
            message = f"--{field.replace('_', '-')}{message[len(field):]}"
            break
    for field in _SECRET_FIELDS:
        flag = f"--{field.replace('_', '-')}"
        message = re.sub(rf"(?<=pass ){field}\b|(?<=\(){field}\b|(?<=, ){field}\b", flag, message)
    return message


def generate(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags, output: str | None) -> int:
    """`kube generate`: print the manifests (or write them to `output`)."""

    def work() -> int:
        return write_output(build_deployment(target, deploy, flags).yaml, output)

    return guarded(work)


def write_output(text: str, output: str | None) -> int:
    """Print `text`, or write it to the file `output` (FlagError naming `--output` when it
    cannot be written); EXIT_OK."""
    if output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        Path(output).write_text(text)
    except OSError as exc:
        raise FlagError(f"--output {output}: {exc.strerror}") from None
    print(f"wrote {output}", file=sys.stderr)
    return EXIT_OK


# -- profile -----------------------------------------------------------------------------------

class Progress:
    """Prints a line each time the run's state or pod readiness changes (`on_event` of the
    watch). `clock` returns seconds (injected for tests)."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name, self._clock, self._t0 = name, clock, clock()
        self._last: tuple[str, str] | None = None

    def __call__(self, state: ops.JobState, jobset: dict[str, Any]) -> None:
        jobs = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        ready = ", ".join(f"{j.get('name')}: {j.get('ready', 0)} ready, {j.get('succeeded', 0)} done, "
                          f"{j.get('failed', 0)} failed" for j in jobs)
        line = (str(state), ready)
        if line == self._last:
            return
        self._last = line
        detail = f" ({ready})" if ready else ""
        print(f"[{self._clock() - self._t0:6.1f}s] run {self._name}: {state}{detail}", flush=True)


async def _open(target: KubeTarget) -> tuple[ApiClient, str]:
    """An API client and the namespace (--namespace, else the context's, else default); the
    caller closes the client. KubeError for a missing kubeconfig or unknown context."""
    api = await load_client(target.kubeconfig, target.kube_context)
    try:
        return api, resolve_namespace(target.namespace, target.kubeconfig, target.kube_context)
    except BaseException:
        await api.close()
        raise


async def _fetch(api: ApiClient, name: str, namespace: str, artifact_dir: str, *, pod: str | None = None) -> int:
    """Download the run's exports from its controller pod's results sidecar into
    ARTIFACT_DIR/NAME/; EXIT_FAILED when it has none."""
    dest = Path(artifact_dir) / name
    fetched = await sidecar.fetch_results_from_pods(api, name, namespace, dest, pod=pod)
    if fetched.written:
        print(f"results: {dest}/ ({', '.join(p.name for p in fetched.written)}) from pod {fetched.pod}")
    if fetched.missing:
        print(f"warning: pod {fetched.pod} has no {', '.join(fetched.missing)}", file=sys.stderr)
    if not fetched.written:
        _error(f"pod {fetched.pod} has no result files; see `aiperf kube logs {name} -n {namespace}`")
        return EXIT_FAILED
    return EXIT_OK


async def _retire(api: ApiClient, name: str, namespace: str, pod: str, *, keep: bool, ttl_s: int) -> None:
    """Shut the results sidecar of `pod` down (the controller Job then completes), unless `keep`."""
    if keep:
        print(f"results sidecar of pod {pod} kept: `aiperf kube shutdown {name} -n {namespace}` retires it "
              f"(it exits by itself {ttl_s} s after the run)")
        return
    if await sidecar.shutdown_sidecar(api, namespace, pod):
        print(f"results sidecar of pod {pod} shut down")


async def _collect(api: ApiClient, name: str, namespace: str, end: sidecar.RunEnd, *, artifact_dir: str,
                   keep: bool, ttl_s: int) -> int:
    """After the run's end: fetch its results (partial ones of a failed run too), retire the
    sidecar, and give the exit code (1 for a failed or cancelled run)."""
    if end.state == ops.JobState.SUSPENDED:
        _error(f"run {name} was cancelled")
        return EXIT_FAILED
    failed = not end.succeeded
    try:
        code = await _fetch(api, name, namespace, artifact_dir, pod=end.pod)
    except KubeClusterError as exc:
        if not failed:
            raise
        print(f"warning: no results: {exc}", file=sys.stderr)
        code = EXIT_FAILED
    if end.pod is not None:
        await _retire(api, name, namespace, end.pod, keep=keep, ttl_s=ttl_s)
    if failed:
        how = f"its control plane exited {end.exit_code}" if end.exit_code is not None else f"JobSet {end.state}"
        _error(f"run {name} failed ({how}); see `aiperf kube logs {name} -n {namespace}`")
        return EXIT_FAILED
    return code


def profile(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags, *, dry_run: bool,
            detach: bool, artifact_dir: str, operator: bool | None = None, keep_sidecar: bool = False) -> int:
    """`kube profile`: build, then (unless `dry_run`, which prints what `kube generate` prints,
    with `--operator` the AIPerfJob, and touches no API) check the namespace, submit the run and
    (unless `detach`) watch it until it ends (its control plane exits), download its results from
    the results sidecar and shut that down (unless `keep_sidecar`). Exit 0 on a completed run, 1
    on a failed or cancelled one.

    `operator` None probes the cluster for the AIPerfJob CRD: operator mode when it is served
    (create the AIPerfJob, the operator does the rest), direct mode otherwise (create the run's
    objects, the CURVE key Secret filled with fresh keys, with the user's own credentials); True or False forces one mode without probing."""
    if dry_run:
        if operator:
            from aiperf.cli.kube_operator import generate_job
            return generate_job(target, deploy, flags, None)
        return generate(target, deploy, flags, None)

    async def work() -> int:
        deployment = build_deployment(target, deploy, flags)
        name, namespace = deployment.settings.name, deployment.settings.namespace
        async with await load_client(target.kubeconfig, target.kube_context) as api:
            if operator is True or (operator is None and await jobs.operator_installed(api)):
                from aiperf.cli.kube_operator import submit_job
                return await submit_job(api, deployment, log_level=deploy.log_level, detach=detach,
                                        artifact_dir=artifact_dir, keep_sidecar=keep_sidecar)
            await ops.ensure_namespace_exists(api, namespace)
            # The run's CURVE keys exist only here and in the Secret: never in a manifest.
            objects = with_curve_keys(deployment.objects, CurveKeys.generate())
            created = await ops.create_all(api, objects)
            for obj in created:
                print(f"created {obj['kind']} {namespace}/{obj['metadata']['name']}")
            if detach:
                print(f"run {name} started; follow it with `aiperf kube list -n {namespace}`, get results "
                      f"with `aiperf kube results {name} --from-pods -n {namespace}`")
                return EXIT_OK
            end = await sidecar.wait_run_end(api, name, namespace, Progress(name))
            return await _collect(api, name, namespace, end, artifact_dir=artifact_dir, keep=keep_sidecar,
                                  ttl_s=deployment.settings.ttl_seconds)

    try:
        return run_async(work)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        print(f"\nstopped watching; the run goes on (`aiperf kube cancel {deploy.name}` stops it)",
              file=sys.stderr)
        return 130


# -- the other commands ------------------------------------------------------------------------

def logs(target: KubeTarget, name: str, *, container: str | None, tail: int | None, pod: str | None) -> int:
    """`kube logs`: the log of one container (default: the controller pod's control-plane)."""
    if tail is not None and tail < 0:
        _error(f"--tail {tail}: must not be negative")
        return EXIT_USER_ERROR

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            which = pod or await ops.controller_pod(api, name, namespace)
            chosen = container if container is not None or pod is not None else DEFAULT_LOG_CONTAINER
            text = await ops.pod_logs(api, which, namespace, container=chosen, tail=tail)
        sys.stdout.write(text)
        return EXIT_OK

    return run_async(work)


def results(target: KubeTarget, name: str, *, from_pods: bool, artifact_dir: str, epoch: str | None = None,
            operator_namespace: str = "aiperf-system") -> int:
    """`kube results`: without `from_pods` download the run stored by the operator from its
    results server (`aiperf.cli.kube_results`); with it wait until the run has ended (its
    control plane exited), then download its result files from the controller pod's results
    sidecar into ARTIFACT_DIR/NAME/ (the sidecar keeps serving; `kube shutdown` retires it)."""
    if epoch is not None and not is_key(epoch):
        _error(f"--epoch {epoch!r}: a run epoch is 9-10 digits, optionally followed by 6 more "
               f"(`GET /api/v1/results/NS/{name}/runs` lists them)")
        return EXIT_USER_ERROR
    if not from_pods:
        from aiperf.cli.kube_results import ResultsServerClient, fetch_stored

        async def stored() -> int:
            api, namespace = await _open(target)
            async with api:
                await fetch_stored(api, name, namespace, artifact_dir, epoch=epoch,
                                   client=ResultsServerClient(api, namespace=operator_namespace))
            return EXIT_OK

        return run_async(stored)
    if epoch is not None:
        _error("--epoch picks a run stored by the operator; --from-pods reads the run's controller pod")
        return EXIT_USER_ERROR

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            end = await sidecar.wait_run_end(api, name, namespace)
            if end.state == ops.JobState.SUSPENDED:
                _error(f"run {name} was cancelled; it has no results")
                return EXIT_FAILED
            return await _fetch(api, name, namespace, artifact_dir, pod=end.pod)

    return run_async(work)


def shutdown(target: KubeTarget, name: str) -> int:
    """`kube shutdown`: retire a finished run's controller pod: `POST /shutdown` to its results
    sidecar, which exits 0; the controller Job and the JobSet then complete (and the JobSet's TTL
    starts). Exit 1 while the run is still going (its control plane runs)."""

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            end = await sidecar.controller_end(api, name, namespace)
            if end is None or end.pod is None:
                pod = await ops.controller_pod(api, name, namespace)  # KubeError when there is none
                _error(f"run {name} is still going (the control plane of pod {pod} runs); "
                       f"`aiperf kube cancel {name} -n {namespace}` stops it")
                return EXIT_FAILED
            if await sidecar.shutdown_sidecar(api, namespace, end.pod):
                print(f"results sidecar of pod {end.pod} shut down; run {name}'s controller pod completes")
            else:
                print(f"results sidecar of pod {end.pod} had already exited")
        return EXIT_OK

    return run_async(work)


def cancel(target: KubeTarget, name: str) -> int:
    """`kube cancel`: in operator mode (an AIPerfJob `name` exists) set its `spec.cancel` (the
    operator suspends the JobSet); in direct mode suspend the run's JobSet (its pods stop; `kube
    delete` removes it)."""

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            job = await jobs.get_job(api, name, namespace)
            if job is not None:
                outcome = await jobs.cancel_job(api, job)
                if outcome == jobs.CancelOutcome.FINISHED:
                    print(f"run {name} already {jobs.phase_of(job)}; nothing to cancel")
                else:
                    print(f"cancelled run {name}: spec.cancel is true on AIPerfJob {namespace}/{name}; "
                          "the operator stops its pods")
                return EXIT_OK
            state = await ops.cancel(api, name, namespace)
        if state == ops.JobState.SUSPENDED:
            print(f"cancelled run {name}: JobSet {jobset_name(name)} suspended, its pods stop; "
                  f"`aiperf kube delete {name} -n {namespace}` removes it")
        else:
            print(f"run {name} already {state}; nothing to cancel")
        return EXIT_OK

    return run_async(work)


def delete(target: KubeTarget, name: str, *, uid: str | None = None) -> int:
    """`kube delete`: in operator mode (an AIPerfJob `name` exists) delete the AIPerfJob with its
    UID as a precondition (garbage collection removes what it owns); in direct mode delete the
    run's JobSet, ConfigMap, RoleBinding, Role and ServiceAccount (each UID-fenced)."""

    async def work() -> int:
        api, namespace = await _open(target)
        async with api:
            job = await jobs.get_job(api, name, namespace)
            if job is not None:
                if uid is not None and job["metadata"]["uid"] != uid:
                    _error(f"AIPerfJob {name} is now uid {job['metadata']['uid']}, not {uid}: "
                           "a new run with the same name; nothing deleted")
                    return EXIT_FAILED
                if await jobs.delete_job(api, job):
                    print(f"deleted AIPerfJob {namespace}/{name}; what it owns goes with it")
                    return EXIT_OK
                _error(f"AIPerfJob {name} was deleted or replaced meanwhile; check `aiperf kube list -n {namespace}`")
                return EXIT_FAILED
            deleted = await ops.delete(api, name, namespace, uid=uid)
        if not deleted:
            _error(f"no run {name} in namespace {namespace}; "
                   f"`aiperf kube list -n {namespace}` shows the runs")
            return EXIT_USER_ERROR
        print(f"deleted {', '.join(deleted)} in namespace {namespace}")
        return EXIT_OK

    return run_async(work)


# -- preflight ---------------------------------------------------------------------------------

async def _get(api: ApiClient, path: str) -> Any:
    return await api.call_api(path, "GET", header_params={"Accept": "application/json"},
                              auth_settings=["BearerToken"], _return_http_data_only=True,
                              response_types_map={200: "object"})


def preflight(target: KubeTarget, *, env_from_secrets: list[str] | None, api_key_secret: str | None,
              headers_secret: str | None, image_pull_secrets: list[str] | None) -> int:
    """`kube preflight`: one PASS/FAIL line per check (kubeconfig, API server, namespace, JobSet
    API, each referenced Secret and key); checks that depend on a failed one are skipped.
    Exit 1 when any check fails, 2 for a malformed flag."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from aiperf.cli.kube_flags import parse_list
    from aiperf.kube import SecretRef

    def refs() -> tuple[list[tuple[str, SecretRef]], list[str]]:
        mapping = parse_mapping("--env-from-secrets", env_from_secrets)
        keyed = [(f"--env-from-secrets {env}", SecretRef.parse(ref, what=f"--env-from-secrets {env}"))
                 for env, ref in mapping.items()]
        for flag, ref in (("--api-key-secret", api_key_secret), ("--headers-secret", headers_secret)):
            if ref:
                keyed.append((flag, SecretRef.parse(ref, what=flag)))
        return keyed, parse_list("--image-pull-secrets", image_pull_secrets)

    failures = 0

    def report(ok: bool, check: str, detail: str) -> bool:
        nonlocal failures
        failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'}  {check}: {detail}")
        return ok

    async def work() -> int:
        keyed, pull = refs()
        try:
            api, namespace = await _open(target)
        except KubeError as exc:
            report(False, "kubeconfig", str(exc))
            return EXIT_FAILED
        async with api:
            report(True, "kubeconfig", f"loaded (server {api.configuration.host})")
            try:
                version = await _get(api, "/version")
                ok = report(True, "api server", f"reachable (Kubernetes {version.get('gitVersion', '?')})")
            except ApiException as exc:
                ok = report(False, "api server", f"answered {exc.status} {exc.reason}")
            except Exception as exc:  # aiohttp's connection errors, TLS errors
                ok = report(False, "api server", f"cannot reach {api.configuration.host}: {exc}")
            if not ok:
                print("SKIP  namespace, JobSet API, secrets: the API server is not reachable")
                return EXIT_FAILED
            try:
                await ops.ensure_namespace_exists(api, namespace)
                ns_ok = report(True, f"namespace {namespace}", "exists")
            except KubeError as exc:
                ns_ok = report(False, f"namespace {namespace}", str(exc))
            try:
                await _get(api, f"/apis/{ops.JOBSET_API_VERSION}")
                report(True, "JobSet API", f"{ops.JOBSET_API_VERSION} installed")
            except ApiException as exc:
                why = ("not installed; install JobSet first" if exc.status == 404
                       else f"{exc.status} {exc.reason}")
                report(False, "JobSet API", f"{ops.JOBSET_API_VERSION} {why}")
            if not ns_ok:
                if keyed or pull:
                    print("SKIP  secrets: the namespace does not exist")
                return EXIT_FAILED
            for flag, ref in keyed:
                await _check_secret(api, namespace, ref.secret, ref.key, flag, report)
            for secret in pull:
                await _check_secret(api, namespace, secret, None, "--image-pull-secrets", report)
        return EXIT_FAILED if failures else EXIT_OK

    return run_async(work)


async def _check_secret(api: ApiClient, namespace: str, secret: str, key: str | None, flag: str,
                        report: Callable[[bool, str, str], bool]) -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    check = f"secret {secret}" + (f" key {key}" if key else "") + f" ({flag})"
    try:
        obj = await _get(api, f"/api/v1/namespaces/{namespace}/secrets/{secret}")
    except ApiException as exc:
        detail = f"no Secret {secret} in namespace {namespace}" if exc.status == 404 else \
            f"cannot read it: {exc.status} {exc.reason}"
        report(False, check, detail)
        return
    data = {**(obj.get("data") or {}), **(obj.get("stringData") or {})}
    if key is not None and key not in data:
        report(False, check, f"Secret {secret} has no key {key} (keys: {', '.join(sorted(data)) or 'none'})")
        return
    report(True, check, "present")
