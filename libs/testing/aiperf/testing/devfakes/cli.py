"""Run one aiperf service alone, against fakes of its peers.

It writes run_config.json and a five-conversation dataset (under --dir, default a new temp
dir), starts small fakes of the peers the service talks to (real sockets, the real wire
protocol), and prints the command that starts the real service by hand. Once the service
registers, a fake controller sends it the commands the real system-controller would and logs
every reply (dev.reply); restart the service and it is driven again. Ctrl+C sends the service
Shutdown and stops the fakes. Logs are JSON lines on stderr (pretty on a terminal).

What each --for TYPE gets (every type but the event-bus-proxy also gets the event bus, each
event it carries logged as fake_bus.event):

  worker                fake timing-manager (--requests credits, after ProfileConfigure) and
                        fake record-processor (logs each raw record). The worker sends to the
                        LLM server at --url: start one, e.g. `aiperf mock-server --port 8000`.
  record-processor      ProfileConfigure, then --requests streamed raw records pushed as a
                        worker would; a fake records-manager logs each MetricRecord.
  records-manager       ProfileConfigure, --requests MetricRecords pushed as a record-processor
                        would, then Finalize: the exports are written under artifacts/.
  timing-manager        --workers fake workers on the credit channels (ping handshake, then an
                        ok return per credit); ProfileConfigure, then ProfileStart: the run's
                        accounting is logged.
  dataset-manager       BuildDataset: dataset files and inputs.json under artifacts/.
  worker-group-manager  PrepareGroup with the written dataset: GroupReady is logged.
  event-bus-proxy       a publisher and a subscriber: an event is published until it comes
                        back through the proxy (dev.relayed).
  api                   events published on the bus until GET /api/progress shows them, then
                        /health and /api/dataset/index.dat (dev.api_checked); the api's port
                        is set in the printed command.
  system-controller     the eight other services as scripted fakes that register, heartbeat and
                        answer BuildDataset, PrepareGroup, ProfileConfigure, ProfileStart
                        (--requests per phase), Finalize and Shutdown as the real ones would.
                        Start the controller with --external-services (printed): it drives a
                        whole profile run against them, prints the report and exits; the fakes
                        then log dev.run_over.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import anyio

from aiperf.messages import ServiceType
from aiperf.runtime import configure_logging
from aiperf.testing.devfakes.fixture import Fixture, write_fixture
from aiperf.testing.devfakes.session import serve, serve_controller_fakes

TYPES = [str(t) for t in ServiceType]


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The `aiperf dev-fakes` flags."""
    parser = argparse.ArgumentParser(prog="aiperf dev-fakes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--for", dest="service", required=True, choices=TYPES, metavar="TYPE",
                        help=f"the service you will run by hand: {', '.join(TYPES)}")
    parser.add_argument("--dir", help="where run_config.json, the dataset, artifacts and IPC sockets go "
                                      "(default: a new temp dir)")
    parser.add_argument("--url", default="http://127.0.0.1:8000",
                        help="LLM server the worker sends to (default: %(default)s)")
    parser.add_argument("--model", default="mock-model", help="model name in requests (default: %(default)s)")
    parser.add_argument("--requests", "--credits", dest="requests", type=int, default=3,
                        help="requests the fakes drive: credits per worker, records pushed, requests per "
                             "phase (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2,
                        help="fake workers of a timing-manager (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.workers < 1:
        parser.error("--requests and --workers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Write the fixture, run the fakes until Ctrl+C; returns the exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(service_id="dev-fakes", level="info")
    directory = Path(args.dir or tempfile.mkdtemp(prefix="aiperf-dev-", dir="/tmp")).resolve()
    service_type = ServiceType(args.service)
    fixture = write_fixture(service_type, directory, url=args.url, model=args.model, requests=args.requests,
                            workers=args.workers)
    run = serve_controller_fakes if service_type is ServiceType.SYSTEM_CONTROLLER else serve
    try:
        return anyio.run(run, fixture, lambda: announce(fixture))
    finally:
        if fixture.temporary_ipc:
            shutil.rmtree(fixture.config.comms.ipc_dir, ignore_errors=True)


def announce(fixture: Fixture) -> None:
    """Print where the fakes are and the command that starts the real service (stdout)."""
    pants, aiperf = fixture.commands()
    what = ("the eight other services are faked" if fixture.service_type is ServiceType.SYSTEM_CONTROLLER
            else "its peers are faked")
    print(f"dev-fakes for the {fixture.service_type} ready in {fixture.directory} ({what}).\n"
          f"In another terminal run:\n  {pants}\n(or: {aiperf})", flush=True)
