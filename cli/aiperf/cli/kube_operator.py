"""Operator mode of `aiperf kube`: the AIPerfJob custom resource of a run (`kube generate
--operator`) and offline validation of AIPerfJob/AIPerfSweep files (`kube validate`).

Both are pure (no API calls). The CR is built from the same checked `Deployment` direct mode
creates, so a flag that direct mode refuses is refused here too, and the CR is validated against
the generated CRD (schema and CEL) before it is printed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml
from kubernetes_asyncio.client import ApiClient

from aiperf.cli.kube_commands import (
    DEFAULT_IMAGE_PARTS,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USER_ERROR,
    Deployment,
    _error,
    _fetch,
    _retire,
    build_deployment,
    guarded,
    write_output,
)
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import ProfileFlags
from aiperf.config import SECRET_ENV_VARS
from aiperf.config.aiperf_form import to_aiperf_body
from aiperf.config.loader import REDACTED
from aiperf.kube import KubeConfigError, jobs, ops, sidecar
from aiperf.kube.client import KubeClusterError
from aiperf.kube.crd_model import (
    API_GROUP,
    API_KEY_ENV_NAMES,
    API_VERSION,
    HEADERS_ENV_NAME,
    JOB_KIND,
    JobPhase,
)
from aiperf.kube.crd_validation import Problem, validate_resource


def compact(value: Any) -> Any:
    """`value` as plain data (what `msgspec.to_builtins` gives) without the struct fields that
    equal their default: the smallest document that decodes back to an equal value."""
    if isinstance(value, msgspec.Struct):
        config = value.__struct_config__
        out: dict[str, Any] = {}
        if config.tag_field is not None:
            out[config.tag_field] = config.tag
        for field in msgspec.structs.fields(value):
            item = getattr(value, field.name)
            if field.default is not msgspec.NODEFAULT and item == field.default:
                continue
            if field.default_factory is not msgspec.NODEFAULT and item == field.default_factory():
                continue
            out[field.encode_name] = compact(item)
        return out
    if isinstance(value, dict):
        return {msgspec.to_builtins(k): compact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [compact(v) for v in value]
    return msgspec.to_builtins(value)


def _pod_template(deployment: Deployment) -> dict[str, Any]:
    s = deployment.settings
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in s.env_vars.items()]
    env += [ref.to_env(k) for k, ref in s.plain_secret_env().items()]
    endpoint = s.endpoint_secret_env()
    env += [endpoint[ours].to_env(aiperfs) for ours, aiperfs in zip(SECRET_ENV_VARS, (API_KEY_ENV_NAMES[0], HEADERS_ENV_NAME),
                                                                   strict=True) if ours in endpoint]
    template: dict[str, Any] = {
        "nodeSelector": dict(s.node_selector), "tolerations": list(s.tolerations),
        "imagePullSecrets": [{"name": n} for n in s.image_pull_secrets],
        "labels": dict(s.labels), "annotations": dict(s.annotations), "serviceAccountName": s.service_account,
        "env": env, "resources": {svc: r.to_manifest() for svc, r in s.resources.items()},
    }
    return {k: v for k, v in template.items() if v not in (None, {}, [])}


def build_job(deployment: Deployment, *, log_level: str = "info") -> dict[str, Any]:
    """The AIPerfJob of a checked deployment, in AIPerf 0.13's shape (its `kube validate` accepts
    it): the benchmark as AIPerf writes one (`aiperf.config.aiperf_form`; `runtime.workers` the
    total worker count, `runtime.workersPerPod` and `recordProcessorsPerPod`, `logging.level`
    `log_level`), `spec.image` (--image; unset: the operator's default), `imagePullPolicy`, the
    pod template (the endpoint's Secrets as `AIPERF_INJECTED_API_KEY`/`AIPERF_INJECTED_HEADERS`,
    with AIPerf's `<redacted>` API key placeholder), TTL and `randomSeed`. Raises FlagError for
    --image-registry/--image-tag, which an AIPerfJob cannot express (it names one image for all
    containers: use --image)."""
    s = deployment.settings
    if (s.image_registry, s.image_tag) != DEFAULT_IMAGE_PARTS:
        raise FlagError("--image-registry/--image-tag: an AIPerfJob names one image for every container "
                        "(spec.image); pass --image REF instead, or neither for the operator's default")
    runtime = msgspec.structs.replace(deployment.benchmark.runtime, workers=s.total_workers,
                                      workers_per_pod=s.workers_per_pod,
                                      record_processors_per_pod=s.record_processors_per_pod)
    logging = msgspec.structs.replace(deployment.benchmark.logging, level=log_level)
    benchmark = msgspec.structs.replace(deployment.benchmark, runtime=runtime, logging=logging)
    body, seed = to_aiperf_body(benchmark)
    if SECRET_ENV_VARS[0] in s.endpoint_secret_env():
        body["endpoint"]["apiKey"] = REDACTED
    spec: dict[str, Any] = {"benchmark": body}
    if seed is not None:
        spec["randomSeed"] = seed
    if benchmark.variables:  # what artifacts.userFiles render with when the run starts
        spec["variables"] = dict(benchmark.variables)
    if s.image is not None:
        spec["image"] = s.image
    spec["imagePullPolicy"] = s.image_pull_policy
    if pod := _pod_template(deployment):
        spec["podTemplate"] = pod
    spec["ttlSecondsAfterFinished"] = s.ttl_seconds
    metadata: dict[str, Any] = {"name": s.name, "namespace": s.namespace}
    if s.labels:
        metadata["labels"] = dict(s.labels)
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": JOB_KIND, "metadata": metadata, "spec": spec}


def generate_job(target: KubeTarget, deploy: KubeDeployFlags, flags: ProfileFlags, output: str | None) -> int:
    """`kube generate --operator`: print the run's AIPerfJob as YAML (or write it to `output`).
    Exit 2 when a flag is wrong or the CR would not pass the CRD (one line per problem)."""

    def work() -> int:
        job = build_job(build_deployment(target, deploy, flags), log_level=deploy.log_level)
        problems = validate_resource(job)
        if problems:
            raise KubeConfigError("the AIPerfJob would be rejected: " + "; ".join(map(str, problems)))
        return write_output(yaml.safe_dump(job, sort_keys=False), output)

    return guarded(work)


class JobProgress:
    """Prints a line each time an AIPerfJob's phase, sub-phase or request count changes (the
    watch's `on_event`). `clock` returns seconds (injected for tests)."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name, self._clock, self._t0 = name, clock, clock()
        self._last: tuple[Any, ...] | None = None

    def __call__(self, job: dict[str, Any]) -> None:
        status = job.get("status") or {}
        line = (status.get("phase") or "Submitted", status.get("subPhase"), status.get("requestsCompleted"),
                status.get("requestsTotal"))
        if line == self._last:
            return
        self._last = line
        detail = f" ({line[1]})" if line[1] else ""
        if line[2] is not None:
            detail += f", {line[2]}/{line[3] if line[3] is not None else '?'} requests"
        print(f"[{self._clock() - self._t0:6.1f}s] run {self._name}: {line[0]}{detail}", flush=True)


def _why(job: dict[str, Any]) -> str:
    """The message of the first False condition of a failed run (what `kubectl describe` shows)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == ("True" if cond.get("type") == "TimedOut" else "False") and cond.get("message"):
            return str(cond["message"])
    return "see `kubectl describe aiperfjob`"


async def submit_job(api: ApiClient, deployment: Deployment, *, log_level: str, detach: bool,
                     artifact_dir: str, keep_sidecar: bool = False) -> int:
    """`kube profile` in operator mode: create the run's AIPerfJob (checked against the CRD
    first), then unless `detach` watch its `status.phase` until it ends; then download the results
    (partial ones of a failed run too) from the controller pod's results sidecar and shut that
    down unless `keep_sidecar`. An attached client (or `keep_sidecar`) marks the CR with
    `KEEP_SIDECAR_ANNOTATION`, so the operator, which copies the results to its own volume
    first, leaves the sidecar to it. Exit 0 completed, 1 failed or cancelled."""
    job = build_job(deployment, log_level=log_level)
    if keep_sidecar or not detach:
        job["metadata"].setdefault("annotations", {})[sidecar.KEEP_SIDECAR_ANNOTATION] = "true"
    problems = validate_resource(job)
    if problems:
        raise KubeConfigError("the AIPerfJob would be rejected: " + "; ".join(map(str, problems)))
    name, namespace = deployment.settings.name, deployment.settings.namespace
    await ops.ensure_namespace_exists(api, namespace)
    await jobs.create_job(api, job)
    print(f"created AIPerfJob {namespace}/{name}; the operator creates and runs its JobSet")
    if detach:
        print(f"run {name} submitted; follow it with `kubectl get aiperfjob {name} -n {namespace} -w`, "
              f"cancel it with `aiperf kube cancel {name} -n {namespace}`")
        return EXIT_OK
    last: dict[str, Any] = {}
    progress = JobProgress(name)

    def on_event(obj: dict[str, Any]) -> None:
        last.update(obj)
        progress(obj)

    phase = await jobs.watch_job_until_done(api, name, namespace, on_event)
    if phase == JobPhase.CANCELLED:
        _error(f"run {name} was cancelled")
        return EXIT_FAILED
    stored = (last.get("status") or {}).get("resultsPath")
    end = await sidecar.controller_end(api, name, namespace)
    code = EXIT_FAILED
    if end is not None and end.pod is not None:
        try:
            code = await _fetch(api, name, namespace, artifact_dir, pod=end.pod)
        except KubeClusterError as exc:
            if phase == JobPhase.COMPLETED and not stored:
                raise
            print(f"warning: no results from the results sidecar: {exc}", file=sys.stderr)
        await _retire(api, name, namespace, end.pod, keep=keep_sidecar, ttl_s=deployment.settings.ttl_seconds)
    if stored:
        print(f"results stored by the operator under {stored} (run epoch {last['status'].get('runEpoch')})")
    if phase == JobPhase.FAILED:
        _error(f"run {name} failed: {_why(last)}")
        return EXIT_FAILED
    return EXIT_OK if stored else code


def _documents(path: str) -> tuple[list[Any], Problem | None]:
    """The YAML documents of `path` (empty ones skipped), or the one problem that stops reading it."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        return [], Problem("", f"cannot read the file: {exc.strerror}")
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None], None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        return [], Problem("", f"not valid YAML{line}: {getattr(exc, 'problem', None) or exc}")


def _label(doc: Any) -> str:
    if not isinstance(doc, dict):
        return "?"
    name = doc.get("metadata", {}).get("name", "?") if isinstance(doc.get("metadata"), dict) else "?"
    return f"{doc.get('kind', '?')}/{name}"


def validate_files(paths: list[str], *, output_format: Literal["text", "json"]) -> int:
    """`kube validate FILE...`: check every AIPerfJob/AIPerfSweep document of the files against
    the generated CRDs (schema and CEL rules, offline) and the typed model. Prints one line per
    problem (`FILE: KIND/NAME: PATH: MESSAGE`, or with `json` one JSON object per line with file,
    document, resource, path, message) and, in text mode, one `valid` line per good document.
    Exit 0 all valid, 1 any invalid document, 2 a file that cannot be read or parsed."""
    code = EXIT_OK
    for path in paths:
        documents, unreadable = _documents(path)
        results: list[tuple[int, str, list[Problem]]] = []
        if unreadable is not None:
            results.append((0, "?", [unreadable]))
            code = EXIT_USER_ERROR
        elif not documents:
            results.append((0, "?", [Problem("", "no YAML documents")]))
            code = max(code, EXIT_FAILED)
        for index, doc in enumerate(documents):
            problems = validate_resource(doc)
            results.append((index, _label(doc), problems))
            if problems:
                code = max(code, EXIT_FAILED)
        for index, label, problems in results:
            for problem in problems:
                if output_format == "json":
                    print(json.dumps({"file": path, "document": index, "resource": label,
                                      "path": problem.path, "message": problem.message}))
                else:
                    print(f"{path}: {label}: {problem}")
            if not problems and output_format == "text":
                print(f"{path}: {label}: valid")
    return code
