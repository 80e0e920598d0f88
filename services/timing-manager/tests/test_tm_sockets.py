"""The real TimingManager with its real sockets (IPC) and two fake workers written here."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import msgspec
import pytest
import zmq.asyncio

from aiperf.comms import Addressing, Channel, DealerSocket, PushSocket
from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.dataset.model import Conversation, Turn
from aiperf.dataset.store import write_dataset
from aiperf.messages import (
    Credit,
    CreditChannel,
    CreditReturn,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    ServiceType,
    TimePing,
    TimePong,
    WorkerConnected,
)
from aiperf.runtime.service import ServiceContext
from aiperf.timing_manager.main import build
from tests._tm_fakes import profile

pytestmark = pytest.mark.anyio


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="tm-", dir="/tmp")  # AF_UNIX paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def fake_worker(ctx: zmq.asyncio.Context, addressing: Addressing, worker_id: str,
                      seen: list[Credit], *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """Ping until ponged, announce itself, then return every credit (num 5 fails)."""
    async with (DealerSocket[CreditChannel](ctx, identity=worker_id, decode=CreditChannel, channel="credits",
                                            connect=[addressing.connect_endpoint(Channel.CREDITS)]) as dealer,
                PushSocket(ctx, channel="credit_returns", immediate=True,
                           connect=[addressing.connect_endpoint(Channel.CREDIT_RETURNS)]) as push):
        sent_at = time.perf_counter_ns()
        await dealer.send(TimePing(worker_id=worker_id, seq=1, sent_at_ns=sent_at))
        pong = await dealer.recv()
        assert isinstance(pong, TimePong) and pong.seq == 1 and pong.ping_sent_at_ns == sent_at
        assert sent_at <= pong.received_at_ns <= time.perf_counter_ns()
        await push.send(WorkerConnected(worker_id=worker_id))
        task_status.started()
        while True:
            message = await dealer.recv()
            if isinstance(message, Credit):
                seen.append(message)
                await push.send(CreditReturn.of(message, worker_id=worker_id, ok=message.num != 5))


async def test_real_sockets_two_workers_closed_loop_with_warmup(ipc_dir: str) -> None:
    dataset = Path(ipc_dir) / "dataset"
    write_dataset(dataset, [Conversation(id=f"c{i}", turns=[Turn(text="hi", input_tokens=1)])
                            for i in range(4)])
    config = RunConfig(run_id="t", mode="profile",
                       comms=CommsOptions(ipc_dir=ipc_dir, tcp_bind_host=None),
                       services=ServiceCounts(workers_per_group=2),
                       runtime=RuntimeOptions(registration_timeout_s=10),
                       benchmark=profile(concurrency=3, request_count=30, warmup_request_count=4))
    ctx = zmq.asyncio.Context()
    addressing = Addressing(ipc_dir=ipc_dir)
    seen: dict[str, list[Credit]] = {"worker-0": [], "worker-1": []}
    try:
        async with AsyncExitStack() as stack:
            tm = await build(ServiceContext(config=config, service_type=ServiceType.TIMING_MANAGER,
                                            service_id="timing-manager", group_id="", zmq=ctx,
                                            addressing=addressing), stack)
            async with anyio.create_task_group() as tg:
                await tg.start(tm.run)
                with anyio.fail_after(20):
                    for worker_id, credits in seen.items():
                        await tg.start(fake_worker, ctx, addressing, worker_id, credits)
                    await tm.handle(ProfileConfigure(request_id="c", dataset_dir=str(dataset)))
                    assert len(tm.pool) == 2
                    finished = await tm.handle(ProfileStart(request_id="s"))
                    assert isinstance(finished, ProfileFinished)
                    result = msgspec.to_builtins(finished.accounting)
                tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)

    assert result["cancelled"] is False
    warmup, profiling = result["phases"]["warmup"], result["phases"]["profiling"]
    assert (warmup["issued"], warmup["returned"], warmup["ok"]) == (4, 4, 4)  # nums 0-3: none fails
    assert (profiling["issued"], profiling["returned"], profiling["sent"]) == (30, 30, 30)
    assert (profiling["ok"], profiling["failed"], profiling["lost"]) == (29, 1, 0)
    assert profiling["start_ns"] < profiling["end_ns"] and profiling["start_wall_ns"] < profiling["end_wall_ns"]
    all_credits = seen["worker-0"] + seen["worker-1"]
    assert sorted(c.num for c in all_credits if c.phase == "profiling") == list(range(30))
    assert all(seen.values())  # both workers got credits
    assert {c.conversation_id for c in all_credits} == {"c0", "c1", "c2", "c3"}
