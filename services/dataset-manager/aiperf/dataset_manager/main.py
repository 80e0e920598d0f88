"""Entry point of the dataset-manager process: `python -m aiperf.dataset_manager.main --help`."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path

from aiperf.comms import Channel, Publisher
from aiperf.dataset_manager.service import DatasetManager
from aiperf.endpoints import PayloadBuilder
from aiperf.messages import ServiceType
from aiperf.runtime import Service, ServiceContext, service_main


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the dataset-manager: dataset files under the run's `dataset_path` (a working folder;
    `<artifact_dir>/dataset` in Kubernetes), `inputs.json` in the artifacts, an event publisher."""
    events = await stack.enter_async_context(Publisher(
        ctx.zmq, connect=[ctx.addressing.connect_endpoint(Channel.EVENT_BUS_FRONTEND)]))
    artifacts = Path(ctx.config.artifact_dir)
    benchmark = ctx.config.benchmark
    return DatasetManager(dataset=benchmark.dataset, seed=benchmark.dataset_seed,
                          tokenizer=benchmark.tokenizer.name,
                          payload=PayloadBuilder.of(benchmark.endpoint, benchmark.model),
                          dataset_dir=Path(ctx.config.dataset_path), inputs_path=artifacts / "inputs.json",
                          compress=ctx.config.kubernetes, events=events, models=tuple(benchmark.models),
                          selection=benchmark.model_selection, model_seed=benchmark.random_seed)


def main(argv: list[str] | None = None) -> int:
    """Run one dataset-manager process; see `--help`."""
    return service_main(ServiceType.DATASET_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
