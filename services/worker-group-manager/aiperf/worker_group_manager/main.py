"""Entry point of the worker-group-manager process: `python -m aiperf.worker_group_manager.main --help`.

In Kubernetes mode (`config.kubernetes`) it downloads the dataset into
`<artifact_dir>/dataset-<group>` (the worker pod's own artifacts emptyDir) from
``http://$AIPERF_CONTROLLER_HOST:${AIPERF_API_PORT:-9090}/api/dataset``, unless the controller's
`ProfileConfigure` names a `dataset_url`. Locally it uses the shared dataset folder as is.
With `--export-level raw` in Kubernetes it uploads the pod's raw parts to the same api at
finalize, authenticated with the token derived from the run's key Secret. With per-pod issuing
(`runtime.issuing: per_pod`) it issues its workers' credits (`build_issuer`).
"""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from aiperf.comms import RAW_UPLOAD_TOKEN, curve_of
from aiperf.config import group_index
from aiperf.messages import Event, ServiceType
from aiperf.runtime import Service, ServiceContext, UserError, service_main
from aiperf.worker_group_manager.service import WorkerGroupManager

if TYPE_CHECKING:
    from aiperf.issuing.pod import PodIssuer


def pod_dataset_dir(artifact_dir: str, group_id: str) -> Path:
    """Where a worker pod keeps its copy of the dataset: `<artifact_dir>/dataset-<group>`
    (never the controller's `<artifact_dir>/dataset`, so a shared filesystem cannot mix them)."""
    return Path(artifact_dir) / f"dataset-{group_id}"


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the worker-group-manager of group `--group-id` (default `g0`); raises `UserError`
    for a group id that is not `g<k>` with k < worker_groups."""
    counts = ctx.config.services
    group = ctx.group_id or "g0"
    try:
        workers = counts.workers_in(group_index(group))
    except ValueError as exc:
        raise UserError(f"--group-id {group!r}: {exc}") from exc
    members = ([f"worker-{group}-{i}" for i in range(workers)]
               + [f"record-processor-{group}-{j}" for j in range(counts.record_processors_per_group)])
    pod_dataset = None
    uploader = None
    api_url = None
    if ctx.config.kubernetes:  # the HTTP client is imported only where it is used
        import aiohttp

        from aiperf.worker_group_manager.download import (
            DatasetDownloader,
            PodDataset,
            RetryPolicy,
            api_url_from_env,
            dataset_url_from_env,
        )
        from aiperf.worker_group_manager.upload import RawUploader

        session = await stack.enter_async_context(aiohttp.ClientSession(auto_decompress=False))
        retry = RetryPolicy(deadline_s=max(60.0, ctx.config.runtime.registration_timeout_s))
        pod_dataset = PodDataset(downloader=DatasetDownloader(session=session, retry=retry),
                                 directory=pod_dataset_dir(ctx.config.artifact_dir, group),
                                 default_url=dataset_url_from_env(os.environ))
        keys = curve_of(ctx.zmq)
        uploader = RawUploader(session=session, retry=retry,
                               token=keys.http_token(RAW_UPLOAD_TOKEN) if keys is not None else None)
        api_url = api_url_from_env(os.environ)
    issuer = await build_issuer(ctx, stack, group, workers) \
        if ctx.config.benchmark.runtime.issuing == "per_pod" else None
    return WorkerGroupManager(service_id=ctx.service_id, group_id=group, members=members,
                              pod_dataset=pod_dataset, raw_uploader=uploader, api_url=api_url, issuer=issuer)


class _NoEvents:
    """A pod's engine publishes nothing: the phases' events come from the timing-manager."""

    async def publish(self, event: Event) -> None:
        return None


async def build_issuer(ctx: ServiceContext, stack: AsyncExitStack, group: str, workers: int) -> PodIssuer:
    """Per-pod issuing: bind the group's pod-local `credits` ROUTER and `credit_returns` PULL
    (IPC, `Addressing.pod_local`: the group's workers connect there), build the issuing engine
    for the group's `workers` workers and a `PodIssuer` whose `pods` DEALER (identity = the
    group id) reaches the timing-manager. Everything closes with `stack`."""
    from aiperf.comms import Channel, DealerSocket, PullSocket, RouterSocket
    from aiperf.issuing.dataset import ReaderConversations
    from aiperf.issuing.engine import TimingManager
    from aiperf.issuing.pod import PodIssuer
    from aiperf.messages import CreditReturnChannel, CreditUpstream, PodDownstream, TimePing

    config, addressing = ctx.config, ctx.addressing
    credits = await stack.enter_async_context(RouterSocket[TimePing](
        ctx.zmq, decode=CreditUpstream, channel="credits", bind=[addressing.pod_local(Channel.CREDITS, group)]))
    returns = await stack.enter_async_context(PullSocket[CreditReturnChannel](
        ctx.zmq, decode=CreditReturnChannel, channel="credit_returns",
        bind=[addressing.pod_local(Channel.CREDIT_RETURNS, group)]))
    link = await stack.enter_async_context(DealerSocket[PodDownstream](
        ctx.zmq, identity=group, decode=PodDownstream, channel="pods",
        connect=[addressing.connect_endpoint(Channel.PODS)]))
    engine = TimingManager(
        service_id=f"{ctx.service_id}-issuer", phases=config.benchmark.phases, seed=config.benchmark.random_seed,
        expected_workers=workers, registration_timeout_s=config.runtime.registration_timeout_s,
        credits=credits, returns=returns, events=_NoEvents(), open_conversations=ReaderConversations.open,
        cancel_drain_s=config.runtime.cancel_drain_s, urls=len(config.benchmark.endpoint.urls))
    return PodIssuer(pod_id=group, engine=engine, link=link)


def main(argv: list[str] | None = None) -> int:
    """Run one worker-group-manager process; see `--help`."""
    return service_main(ServiceType.WORKER_GROUP_MANAGER, build, argv)


if __name__ == "__main__":
    sys.exit(main())
