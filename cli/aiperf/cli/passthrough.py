"""Commands whose arguments belong to another program's parser: dispatched before the main
CLI is even imported, so service processes start fast. Imports nothing of the messages (msgspec:
~50 ms), since `aiperf --help` builds its `service` help from `SERVICE_TYPES`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

SERVICE_TYPES = ["system-controller", "event-bus-proxy", "dataset-manager", "timing-manager", "records-manager",
                 "api", "worker-group-manager", "worker", "record-processor"]
"""The values of `aiperf.messages.ServiceType`, in its order (a test keeps them equal)."""


def run_service_command(argv: list[str]) -> int:
    """`aiperf service <type> --config run_config.json [--service-id ID] [--group-id G]`."""
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: aiperf service TYPE --config run_config.json [--service-id ID] [--group-id G]\n\n"
              "Run one aiperf service process by hand (Kubernetes containers do this).\n"
              f"TYPE: {', '.join(SERVICE_TYPES)}.\n"
              "`aiperf service TYPE --help` shows that service's flags.")
        return 0
    if argv[0] not in SERVICE_TYPES:
        print(f"error: unknown service type {argv[0]!r}; expected one of: {', '.join(SERVICE_TYPES)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"aiperf.{argv[0].replace('-', '_')}.main")
    main: Callable[[list[str]], int] = module.main
    return main(argv[1:])


def run_mock_server(argv: list[str]) -> int:
    """`aiperf mock-server ...`: the bundled OpenAI-compatible mock LLM server."""
    from aiperf.mock_server.main import main

    return main(argv)


def run_dev_fakes(argv: list[str]) -> int:
    """`aiperf dev-fakes ...`: fakes of a service's peers, to run that service alone."""
    from aiperf.testing.devfakes import main

    return main(argv)


PASSTHROUGH: dict[str, Callable[[list[str]], int]] = {
    "service": run_service_command,
    "mock-server": run_mock_server,
    "dev-fakes": run_dev_fakes,
}
