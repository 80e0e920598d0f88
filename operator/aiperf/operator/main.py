"""Entry point of the operator: `aiperf-operator --help`.

The flags are final; the reconciler behind them is not written yet, so anything but `--help`
prints the help and a line saying so, and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from aiperf.kube.crd_model import API_GROUP, API_VERSION

PROG = "aiperf-operator"
DEFAULT_HEALTH_PORT = 8080
DEFAULT_RESULTS_PORT = 8081
DEFAULT_METRICS_PORT = 8082
DEFAULT_RESULTS_DIR = "/results"


def build_parser() -> argparse.ArgumentParser:
    """The operator's flags."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=f"Reconcile AIPerfJob and AIPerfSweep resources ({API_GROUP}/{API_VERSION}): "
                    "create each run's ServiceAccount, Role, RoleBinding, ConfigMap and JobSet, follow "
                    "it to the end, and keep its results on the results volume, served over HTTP.",
    )
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig to use (default: the in-cluster ServiceAccount, else $KUBECONFIG)")
    parser.add_argument("--namespace", "-n", action="append", metavar="NS", default=None,
                        help="watch this namespace (repeatable; default: every namespace)")
    parser.add_argument("--standalone", action="store_true",
                        help="run without peering with other operator replicas (a single replica)")
    parser.add_argument("--health-port", type=int, default=DEFAULT_HEALTH_PORT, metavar="PORT",
                        help=f"port of GET /healthz, the liveness and readiness probe (default {DEFAULT_HEALTH_PORT})")
    parser.add_argument("--results-dir", default=DEFAULT_RESULTS_DIR, metavar="DIR",
                        help=f"results volume: <ns>/<name>/<epoch>/ per run (default {DEFAULT_RESULTS_DIR})")
    parser.add_argument("--results-port", type=int, default=DEFAULT_RESULTS_PORT, metavar="PORT",
                        help=f"port of the results server (default {DEFAULT_RESULTS_PORT})")
    parser.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, metavar="PORT",
                        help=f"port of the Prometheus metrics (default {DEFAULT_METRICS_PORT})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags; `--help` prints the help and exits 0. The reconciler is not implemented
    yet: any other invocation prints the help and one line on stderr, and returns 2."""
    parser = build_parser()
    parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    parser.print_help()
    print(f"{PROG}: the reconciler is not implemented yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
