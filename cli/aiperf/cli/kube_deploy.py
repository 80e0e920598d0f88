"""The manifests of a run from the `kube` flags (what `kube generate` prints and `kube profile`
creates in direct mode; `aiperf.cli.kube_operator` builds the AIPerfJob from the same checked
`Deployment`). Pure: no API calls."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.kube_flags import parse_list, parse_mapping, parse_resources, parse_tolerations
from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.kube_shared import guarded, offline_namespace, write_output
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
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
    secret_values_from_env,
    to_yaml,
)
from aiperf.kube.settings import derived_total_workers

DEFAULT_IMAGE_PARTS = (KubeDeployFlags.image_registry, KubeDeployFlags.image_tag)
"""--image-registry and --image-tag when not given."""


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
    built = build_benchmark(flags, LocalFlags(ui="none", issuing=deploy.issuing, aggregation=deploy.aggregation))
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


__all__ = ["DEFAULT_IMAGE_PARTS", "Deployment", "build_deployment", "generate"]
