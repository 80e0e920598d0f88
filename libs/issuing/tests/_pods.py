"""Shared by the pod tests: an IPC folder, the coordinator's real ROUTER and a fake pod."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import zmq.asyncio

from aiperf.comms import DealerSocket, RouterSocket
from aiperf.messages import PodDownstream, PodUpstream


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="pods-", dir="/tmp")  # AF_UNIX paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@asynccontextmanager
async def router(ctx: zmq.asyncio.Context, ipc_dir: str) -> AsyncIterator[RouterSocket[PodUpstream]]:
    async with RouterSocket[PodUpstream](ctx, decode=PodUpstream, channel="pods",
                                         bind=[f"ipc://{ipc_dir}/pods.ipc"]) as sock:
        yield sock


def dealer(ctx: zmq.asyncio.Context, ipc_dir: str, pod_id: str) -> DealerSocket[PodDownstream]:
    return DealerSocket[PodDownstream](ctx, identity=pod_id, decode=PodDownstream, channel="pods",
                                       connect=[f"ipc://{ipc_dir}/pods.ipc"])
