"""`aiperf dev-fakes --for TYPE`: run one service alone, against fakes of its peers.

Starts, in this process: a fake system-controller (the control ROUTER), the event bus,
and, for a worker, a fake timing-manager (hands out credits) and a fake record-processor
(prints each raw record); for a record-processor, a fake records-manager. It writes a
`run_config.json` and prints the command that starts the real service against them. When
the service registers it is sent `ProfileConfigure` (with a small synthetic dataset), and
on Ctrl+C a `Shutdown`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

import anyio
import structlog
import zmq.asyncio

from aiperf.comms import Addressing, Channel, EventBusProxy
from aiperf.config import (
    Benchmark,
    CommsOptions,
    Endpoint,
    Length,
    Prompts,
    RunConfig,
    RuntimeOptions,
    SyntheticDataset,
    dump_run_config,
)
from aiperf.dataset import build_conversations, write_dataset
from aiperf.messages import ProfileConfigure, ServiceType, Shutdown
from aiperf.runtime import configure_logging
from aiperf.runtime.control_server import ControlServer
from aiperf.testing.fakes import (
    FakeController,
    FakeRecordProcessor,
    FakeRecordsManager,
    FakeTimingManager,
)

log = structlog.get_logger("aiperf.testing.devfakes")

TYPES = [str(t) for t in ServiceType if t is not ServiceType.SYSTEM_CONTROLLER]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aiperf dev-fakes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--for", dest="service", required=True, choices=TYPES,
                        help="the service you will run by hand")
    parser.add_argument("--dir", help="where run_config.json, the dataset and IPC sockets go "
                                      "(default: a new temp dir)")
    parser.add_argument("--url", default="http://127.0.0.1:8000",
                        help="LLM server the worker sends to (e.g. `aiperf mock-server`)")
    parser.add_argument("--model", default="mock-model")
    parser.add_argument("--credits", type=int, default=3, help="credits per worker")
    return parser.parse_args(argv)


def write_fixture(directory: Path, args: argparse.Namespace) -> tuple[RunConfig, Path, Path]:
    """run_config.json and a five-conversation synthetic dataset under `directory`."""
    from aiperf.tokenizer import load_tokenizer

    dataset_dir = directory / "dataset"
    dataset = SyntheticDataset(entries=5, prompts=Prompts(isl=Length(mean=32), osl=Length(mean=16)))
    conversations = build_conversations(dataset, load_tokenizer(None), seed=1)
    write_dataset(dataset_dir, conversations)
    config = RunConfig(
        run_id="dev", mode="profile", artifact_dir=str(directory / "artifacts"),
        comms=CommsOptions(ipc_dir=str(directory / "ipc"), tcp_bind_host=None),
        runtime=RuntimeOptions(heartbeat_interval_s=1.0, log_level="info"),
        benchmark=Benchmark(models=[args.model], endpoint=Endpoint(urls=[args.url], streaming=True),
                            datasets=[dataset]))
    Path(config.comms.ipc_dir).mkdir(parents=True, exist_ok=True)
    path = directory / "run_config.json"
    dump_run_config(config, path)
    return config, path, dataset_dir


def main(argv: list[str] | None = None) -> int:
    """Run the fakes until Ctrl+C."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(service_id="dev-fakes", level="info")
    directory = Path(args.dir or tempfile.mkdtemp(prefix="aiperf-dev-", dir="/tmp")).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    config, config_path, dataset_dir = write_fixture(directory, args)
    service_id = {"worker": "worker-g0-0", "record-processor": "record-processor-g0-0",
                  "worker-group-manager": "worker-group-manager-g0"}.get(args.service, args.service)
    group = " --group-id g0" if service_id.endswith(("-g0", "-g0-0")) else ""
    target = f"services/{args.service}:main"
    print(f"fakes ready in {directory}. In another terminal run:\n"
          f"  ./pants run {target} -- --config {config_path} --service-id {service_id}{group}\n"
          f"(or: aiperf service {args.service} --config {config_path} --service-id {service_id}{group})",
          flush=True)
    return anyio.run(_serve, args, config, service_id, dataset_dir)


async def _serve(args: argparse.Namespace, config: RunConfig, service_id: str, dataset_dir: Path) -> int:
    ctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=config.comms.ipc_dir)
    tm = FakeTimingManager(ctx, addressing, credits_per_worker=args.credits)
    try:
        async with anyio.create_task_group() as tg:
            control: ControlServer = await tg.start(FakeController(ctx, addressing).run)
            await tg.start(EventBusProxy(ctx, frontend=addressing.bind_endpoints(Channel.EVENT_BUS_FRONTEND),
                                         backend=addressing.bind_endpoints(Channel.EVENT_BUS_BACKEND)).run)
            if args.service == "worker":
                await tg.start(tm.run)
                await tg.start(FakeRecordProcessor(ctx, addressing).run)
            if args.service == "record-processor":
                await tg.start(FakeRecordsManager(ctx, addressing).run)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                tg.start_soon(_configure_when_registered, control, service_id, dataset_dir, tm)
                async for _ in signals:
                    break
            if service_id in control.services:
                await control.ask(service_id, Shutdown(request_id="dev-shutdown", reason="dev-fakes stop"),
                                  timeout=10)
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    return 0


async def _configure_when_registered(control: ControlServer, service_id: str, dataset_dir: Path,
                                     tm: FakeTimingManager) -> None:
    while service_id not in control.services:
        await control.wait_changed()
    log.info("dev.registered", service=service_id)
    try:
        reply = await control.ask(service_id, ProfileConfigure(
            request_id="dev-configure", dataset_dir=str(dataset_dir)), timeout=60)
    except Exception as exc:  # shown to the developer; the fakes keep running
        log.warning("dev.configure_failed", service=service_id, error=str(exc))
        return
    log.info("dev.configured", service=service_id, reply=type(reply).__name__)
    tm.armed.set()
