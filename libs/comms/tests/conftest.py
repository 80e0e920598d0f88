"""Fixtures for real-socket tests: a ZMQ context, and every test runs over IPC and over TCP."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
import zmq
import zmq.asyncio

from aiperf.comms import Addressing, Channel
from tests._comms_net import Net

ALL_TCP_PORTS_EPHEMERAL = {channel.label: 0 for channel in Channel}


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    # tmp_path is too long for AF_UNIX paths (108 bytes); keep IPC paths short.
    path = tempfile.mkdtemp(prefix="aic-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["ipc", "tcp"])
def net(request: pytest.FixtureRequest, ipc_dir: str) -> Net:
    if request.param == "ipc":
        return Net("ipc", Addressing(ipc_dir=ipc_dir))
    return Net("tcp", Addressing(ipc_dir=ipc_dir, tcp_bind_host="127.0.0.1",
                                 ports=dict(ALL_TCP_PORTS_EPHEMERAL)))


@pytest.fixture
def ctx() -> Iterator[zmq.asyncio.Context]:
    context = zmq.asyncio.Context()
    yield context
    # Every wrapper closes its socket; linger=0 only guards a failed test from hanging here.
    context.destroy(linger=0)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio only: the code runs on asyncio (pyzmq asyncio sockets, uvloop); anyio would
    otherwise also run every test on trio, which selenium brings in."""
    return "asyncio"

