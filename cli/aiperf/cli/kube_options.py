"""The flag groups of `aiperf kube` (cyclopts flattens each dataclass into the command's flags;
each field's docstring is its `--help` text). Standard library and cyclopts only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from cyclopts import Group, Parameter

CLUSTER = Group("Cluster", sort_key=1)
DEPLOYMENT = Group("Deployment", sort_key=2)


@Parameter(name="*", group=CLUSTER)
@dataclass(frozen=True, kw_only=True)
class KubeTarget:
    """Which cluster and namespace: shared by every `aiperf kube` command."""

    kubeconfig: str | None = None
    """Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)."""
    kube_context: str | None = None
    """Kubeconfig context (default: the current context)."""
    namespace: Annotated[str | None, Parameter(name=["--namespace", "-n"])] = None
    """Namespace of the run (default: the context's namespace, else default). It must exist: it is
    never created."""


@Parameter(name="*", group=DEPLOYMENT)
@dataclass(frozen=True, kw_only=True)
class KubeDeployFlags:
    """How one run is deployed (everything but the benchmark itself)."""

    name: str
    """Run name: objects are named aiperf-NAME (lowercase letters, digits and '-')."""
    config: str | None = None
    """YAML or JSON file of flag values (see `aiperf kube init`); flags given on the command line
    override its values."""
    image: str | None = None
    """One image for every container, e.g. registry.example/aiperf/all:0.1.0 (the AIPerfJob's
    spec.image in operator mode). Replaces --image-registry/--image-tag: give one or the other."""
    image_registry: str = "localhost"
    """Registry of the per-service images REGISTRY/aiperf/SERVICE:TAG (empty: no registry part)."""
    image_tag: str = "latest"
    """Tag of the per-service aiperf images."""
    image_pull_policy: str = "IfNotPresent"
    """Image pull policy of every container: Always, IfNotPresent or Never (AIPerf's always,
    if-not-present and never too)."""
    total_workers: int | None = None
    """Workers in total (replaces --workers-max), split into pods of --workers-per-pod (default,
    AIPerf's: the peak concurrency / 100, rounded up, then up to whole pods when more than one)."""
    workers_per_pod: int = 10
    """Workers in one worker pod (the last pod may hold fewer)."""
    record_processors_per_pod: int | None = None
    """Record processors in each worker pod (default: workers per pod / 4, at least 1)."""
    resources: str | None = None
    """Per-container resources by service type, JSON: '{"worker": {"requests": {"cpu": "1"},
    "limits": {"cpu": "1"}}}' (default: requests = limits, per service)."""
    api_key_secret: str | None = None
    """SECRET/KEY holding the API key (needed with --api-key; the value itself never goes into
    the manifests)."""
    headers_secret: str | None = None
    """SECRET/KEY holding the JSON object of --header values (needed with --header)."""
    env_from_secrets: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Environment variables from Secrets, ENV -> SECRET/KEY: --env-from-secrets.ENV SECRET/KEY,
    --env-from-secrets ENV=SECRET/KEY or a JSON object (repeatable)."""
    env_vars: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Plain environment variables of every container: --env-vars.NAME VALUE, NAME=VALUE or a JSON
    object (repeatable)."""
    labels: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Labels on every object: --labels.KEY VALUE, KEY=VALUE or a JSON object (repeatable)."""
    annotations: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Annotations on every object: --annotations.KEY VALUE, KEY=VALUE or a JSON object
    (repeatable)."""
    node_selector: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Node labels the pods must run on: --node-selector.KEY VALUE, KEY=VALUE or a JSON object
    (repeatable)."""
    tolerations: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Pod tolerations: a JSON object or list, or KEY=VALUE:EFFECT, KEY:EFFECT, KEY (repeatable)."""
    image_pull_secrets: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None
    """Secrets for pulling the images (repeatable or comma-separated)."""
    ttl_seconds: int = 300
    """Seconds after the run finishes before Kubernetes deletes its pods."""
    service_account: str | None = None
    """ServiceAccount the pods run as (default: the namespace's default account)."""
    log_level: str = "info"
    """Log level of the services in the pods (debug, info, warning, error)."""
    issuing: Literal["central", "per_pod"] | None = None
    """Who issues the credits: central (the controller pod's timing-manager sends every request's
    credit) or per_pod (each worker pod issues its own workers' credits from its slice of the
    plan; the controller only hands out the slices and adds up counters: for runs with many
    worker pods). Same requests, results and exports either way (default: central)."""
    aggregation: Literal["records", "sharded"] | None = None
    """How results reach the controller pod's records-manager: records (in batches as they are
    made) or sharded (each worker pod's record-processors aggregate their own and send them once,
    at the end: the same exact statistics and exports, far less work for the controller; the
    live progress counts then jump at each phase's end; no --slice-duration) (default: records)."""
