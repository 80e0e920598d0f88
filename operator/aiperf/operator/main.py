"""Entry point of the operator: `aiperf-operator [--kubeconfig FILE] [--namespace NS ...]`. The
Deployment's other container, the results server over the same results volume, is its own
service and image (`results-server` in the service catalog's auxiliary table).

Wires the process: reads the flags and the cluster configuration (kubeconfig, or the pod's
ServiceAccount in a cluster), serves `/healthz` and `/metrics`, and runs kopf with the handlers
of `aiperf.operator.handlers` until SIGINT/SIGTERM (kopf's own signal handling). Exit codes: 0
after a clean stop, 2 for a configuration the user must fix (one line on stderr), 1 when the
operator failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import kopf
import structlog

from aiperf.crd.model import API_GROUP, API_VERSION
from aiperf.kubeapi import KubeError, load_configuration
from aiperf.operator.connection import client_factory, connection_info, pod_namespace
from aiperf.operator.desired import Defaults
from aiperf.operator.handlers import build_registry, tune
from aiperf.operator.metrics import Metrics
from aiperf.operator.probes import build_app, serving
from aiperf.operator.results import ResultsStore
from aiperf.operator.startup import DEFAULT_THRESHOLDS, StartupThresholds

PROG = "aiperf-operator"
DEFAULT_HEALTH_PORT = 8080
DEFAULT_METRICS_PORT = 8082
DEFAULT_RESULTS_DIR = "/results"
DEFAULT_RESYNC_S = 30.0


def build_parser() -> argparse.ArgumentParser:
    """The operator's flags."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=f"Reconcile AIPerfJob resources ({API_GROUP}/{API_VERSION}): create each run's "
                    "ServiceAccount, Role, RoleBinding, CURVE key Secret, ConfigMap and JobSet, and follow it "
                    "to the end in "
                    "status.phase.")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig to use (default: the in-cluster ServiceAccount, else $KUBECONFIG "
                             "or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    parser.add_argument("--namespace", "-n", action="append", metavar="NS", default=None,
                        help="watch this namespace (repeatable; default: every namespace)")
    parser.add_argument("--standalone", action="store_true",
                        help="run without peering with other operator replicas (a single replica)")
    parser.add_argument("--image-registry", default="localhost", metavar="REG",
                        help="registry of the service images when a CR sets no spec.image (default localhost)")
    parser.add_argument("--image-tag", default="latest", metavar="TAG",
                        help="tag of the service images when a CR sets no spec.image (default latest)")
    parser.add_argument("--resync-interval", type=float, default=DEFAULT_RESYNC_S, metavar="S",
                        help=f"seconds between status checks of every run (default {DEFAULT_RESYNC_S:g})")
    _seconds(parser, "--startup-warn-after", "AIPERF_OPERATOR_STARTUP_WARN_AFTER", DEFAULT_THRESHOLDS.warn_after_s,
             "seconds a startup blocker (image pull, config, crash, scheduling) persists before a Warning Event")
    _seconds(parser, "--startup-fail-after", "AIPERF_OPERATOR_STARTUP_FAIL_AFTER", DEFAULT_THRESHOLDS.fail_after_s,
             "seconds an unchanged critical startup blocker persists before the run fails")
    _seconds(parser, "--startup-unschedulable-fail-after", "AIPERF_OPERATOR_STARTUP_UNSCHEDULABLE_FAIL_AFTER",
             DEFAULT_THRESHOLDS.unschedulable_fail_after_s,
             "the same for a pod no node can ever take (capacity shortages never fail a run)")
    _seconds(parser, "--heartbeat-lost-after", "AIPERF_OPERATOR_HEARTBEAT_LOST_AFTER",
             DEFAULT_THRESHOLDS.heartbeat_lost_after_s,
             "seconds without a controller heartbeat (once one was seen) before the run fails and its JobSet goes")
    parser.add_argument("--results-service", default=os.environ.get("AIPERF_OPERATOR_RESULTS_SERVICE") or None,
                        metavar="NS/SVC:PORT",
                        help="the operator's results server as the API server's services/proxy reaches it, e.g. "
                             "aiperf-system/aiperf-operator:8081: sweep-controllers read a child's stored summary "
                             "there when its results sidecar is gone (default: none; env "
                             "AIPERF_OPERATOR_RESULTS_SERVICE)")
    parser.add_argument("--health-port", type=int, default=DEFAULT_HEALTH_PORT, metavar="PORT",
                        help=f"port of GET /healthz, the liveness and readiness probe (default {DEFAULT_HEALTH_PORT})")
    parser.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, metavar="PORT",
                        help=f"port of GET /metrics, Prometheus text format (default {DEFAULT_METRICS_PORT})")
    parser.add_argument("--results-dir", default=DEFAULT_RESULTS_DIR, metavar="DIR",
                        help="results volume: each finished run's exports are copied to <ns>/<name>/<epoch>/ "
                             f"(default {DEFAULT_RESULTS_DIR}; runs kept per job: env AIPERF_RESULTS_KEEP, "
                             "default 10); the Deployment's results-server container serves it")
    return parser


def _seconds(parser: argparse.ArgumentParser, flag: str, env: str, default: float, text: str) -> None:
    """A seconds flag whose default comes from `env` when set."""
    raw = os.environ.get(env)
    try:
        value = float(raw) if raw else default
    except ValueError:
        parser.error(f"{env}={raw!r} is not a number of seconds")
    parser.add_argument(flag, type=float, default=value, metavar="S",
                        help=f"{text} (default {value:g}; env {env})")


async def serve(args: argparse.Namespace, results: ResultsStore) -> None:
    """Run the operator until kopf stops. Raises `KubeError` for an unusable configuration."""
    config = await load_configuration(args.kubeconfig, args.context)
    metrics = Metrics()
    thresholds = StartupThresholds(warn_after_s=args.startup_warn_after, fail_after_s=args.startup_fail_after,
                                   unschedulable_fail_after_s=args.startup_unschedulable_fail_after,
                                   heartbeat_lost_after_s=args.heartbeat_lost_after)
    registry = build_registry(connect=client_factory(config), metrics=metrics, resync_interval=args.resync_interval,
                              defaults=Defaults(image_registry=args.image_registry, image_tag=args.image_tag,
                                                results_service=args.results_service),
                              thresholds=thresholds, results=results)
    default_namespace = pod_namespace()

    def login(**_: object) -> kopf.ConnectionInfo:
        return connection_info(config, default_namespace)

    kopf.on.login(registry=registry)(login)
    ready = asyncio.Event()
    health = build_app(metrics=metrics if args.metrics_port == args.health_port else None, ready=ready.is_set)
    async with serving(health, host="0.0.0.0", port=args.health_port):  # noqa: S104 - probes come from the kubelet
        if args.metrics_port != args.health_port:
            async with serving(build_app(metrics=metrics, ready=None), host="0.0.0.0", port=args.metrics_port):  # noqa: S104
                await _operate(registry, args, ready)
        else:
            await _operate(registry, args, ready)


async def _operate(registry: kopf.OperatorRegistry, args: argparse.Namespace, ready: asyncio.Event) -> None:
    namespaces = args.namespace or []
    await kopf.operator(registry=registry, settings=tune(kopf.OperatorSettings()), standalone=args.standalone,
                        clusterwide=not namespaces, namespaces=namespaces, ready_flag=ready)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags and run the operator (see the module doc for the exit codes)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())
    try:
        results = ResultsStore(Path(args.results_dir))
    except ValueError as exc:  # AIPERF_RESULTS_KEEP
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(args, results))
    except KubeError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: cannot serve the probes: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
