"""Operator mode of `aiperf kube`: the AIPerfJob custom resource of a run (`kube generate
--operator`) and offline validation of AIPerfJob/AIPerfSweep files (`kube validate`).

Both are pure (no API calls). The CR is built from the same checked `Deployment` direct mode
creates, so a flag that direct mode refuses is refused here too, and the CR is validated against
the generated CRD (schema and CEL) before it is printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml

from aiperf.cli.kube_deploy import DEFAULT_IMAGE_PARTS, Deployment, build_deployment
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, EXIT_USER_ERROR, guarded, write_output
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import ProfileFlags
from aiperf.config import SECRET_ENV_VARS
from aiperf.config.aiperf_form import to_aiperf_body
from aiperf.config.loader import REDACTED
from aiperf.crd.model import API_GROUP, API_KEY_ENV_NAMES, API_VERSION, HEADERS_ENV_NAME, JOB_KIND
from aiperf.crd.validation import Problem, validate_resource
from aiperf.kube import KubeConfigError


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
        job = rejected_if_invalid(build_job(build_deployment(target, deploy, flags), log_level=deploy.log_level))
        return write_output(yaml.safe_dump(job, sort_keys=False), output)

    return guarded(work)


def rejected_if_invalid(cr: dict[str, Any]) -> dict[str, Any]:
    """`cr` (an AIPerfJob or AIPerfSweep) when the generated CRD accepts it; KubeConfigError
    naming every problem otherwise."""
    problems = validate_resource(cr)
    if problems:
        raise KubeConfigError(f"the {cr.get('kind')} would be rejected: " + "; ".join(map(str, problems)))
    return cr


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
