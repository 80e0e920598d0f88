"""The shared command line of every service's `main.py`:
`--config run_config.json --service-id ID [--group-id G]`."""

from __future__ import annotations

import argparse
import sys

from aiperf.config import ConfigError, load_run_config
from aiperf.messages import ServiceType
from aiperf.runtime.errors import EXIT_USER_ERROR
from aiperf.runtime.service import Build, run_service


def service_main(service_type: ServiceType, build: Build, argv: list[str] | None = None) -> int:
    """Parse the standard service flags, load the run config and run the service.

    A missing or invalid config is a user error: one line on stderr, exit code 2."""
    parser = argparse.ArgumentParser(
        prog=str(service_type),
        description=f"Run one aiperf {service_type} process. It registers with the "
                    "system-controller found through run_config.json (IPC) or "
                    "AIPERF_CONTROLLER_HOST (TCP). To debug it alone, start fakes of its "
                    "peers first: `aiperf dev-fakes --for " + str(service_type) + "`.")
    parser.add_argument("--config", required=True, help="path of run_config.json")
    parser.add_argument("--service-id", default=str(service_type),
                        help="unique id, also the ZMQ identity (default: the type)")
    parser.add_argument("--group-id", default="", help="worker group (pod) of this instance")
    args = parser.parse_args(argv)
    try:
        config = load_run_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    return run_service(config=config, service_type=service_type, service_id=args.service_id,
                       group_id=args.group_id, build=build)
