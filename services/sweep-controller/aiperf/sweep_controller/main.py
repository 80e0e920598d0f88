"""Entry point of the sweep-controller: `sweep-controller [--artifact-dir DIR] [--kubeconfig FILE]`.

The operator runs it as the one container of the sweep's JobSet beside a results sidecar. The
sweep comes from the environment the operator sets (`AIPERF_SWEEP_NAME`, `AIPERF_SWEEP_NAMESPACE`,
`AIPERF_SWEEP_UID`); the cluster from the pod's ServiceAccount (or `--kubeconfig`, by hand and in
tests). Exit codes: those of `SweepController.run`, and 2 for a missing variable or an unusable
kubeconfig (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from aiperf.kubeapi import KubeApi, KubeError, client_of, connect, load_configuration
from aiperf.kuberun.sweeps import RESULTS_SERVICE_ENV, ResultsServerSummaries, SidecarSummaries
from aiperf.sweep_controller.controller import EXIT_BAD_SPEC, EXIT_FAILED, SweepController

PROG = "sweep-controller"
NAME_ENV, NAMESPACE_ENV, UID_ENV = "AIPERF_SWEEP_NAME", "AIPERF_SWEEP_NAMESPACE", "AIPERF_SWEEP_UID"
DEFAULT_ARTIFACT_DIR = "/results"


def build_parser() -> argparse.ArgumentParser:
    """The sweep-controller's flags."""
    parser = argparse.ArgumentParser(prog=PROG, description="Run one AIPerfSweep's child AIPerfJobs in order, "
                                     "then write the sweep aggregate for the operator to harvest.")
    parser.add_argument("--artifact-dir", default=DEFAULT_ARTIFACT_DIR,
                        help=f"where the aggregate is written (default {DEFAULT_ARTIFACT_DIR})")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig (default: the pod's ServiceAccount)")
    parser.add_argument("--poll-s", type=float, default=2.0, help="seconds between reads of a running child")
    return parser


class Unconfigured(Exception):
    """No usable cluster configuration (the message says why)."""


async def _client(kubeconfig: str | None) -> KubeApi:
    """The client of `--kubeconfig`, else of the pod's ServiceAccount; `Unconfigured` when
    neither can be used."""
    try:
        return await connect(kubeconfig, None) if kubeconfig else client_of(await load_configuration(None))
    except KubeError as exc:
        raise Unconfigured(str(exc)) from None


async def serve(args: argparse.Namespace, *, name: str, namespace: str, uid: str) -> int:
    """Run the sweep; the exit code."""
    artifact_dir = Path(args.artifact_dir)
    api = await _client(args.kubeconfig)
    try:
        service = os.environ.get(RESULTS_SERVICE_ENV)
        stored = ResultsServerSummaries(api=api, service=service) if service else None
        summaries = SidecarSummaries(api=api, cache_dir=artifact_dir / ".children", fallback=stored)
        controller = SweepController(api=api, namespace=namespace, name=name, uid=uid, artifact_dir=artifact_dir,
                                     summaries=summaries, poll_s=args.poll_s)
        return await controller.run()
    finally:
        await api.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags and the environment and run the sweep (see the module doc)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())
    missing = [var for var in (NAME_ENV, NAMESPACE_ENV, UID_ENV) if not os.environ.get(var)]
    if missing:
        print(f"{PROG}: {', '.join(missing)} not set (the operator sets them on the sweep's pod)", file=sys.stderr)
        return EXIT_BAD_SPEC
    try:
        return asyncio.run(serve(args, name=os.environ[NAME_ENV], namespace=os.environ[NAMESPACE_ENV],
                                 uid=os.environ[UID_ENV]))
    except Unconfigured as exc:
        print(f"{PROG}: no usable cluster configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_SPEC
    except KubeError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
