"""Two worker pods, each a real `PodIssuer` running the real engine on its own sockets (IPC)
against two fake local workers, under the real `PodCoordinator`: every credit of the plan is
issued by exactly one pod, a fixed schedule's entries are partitioned, and the coordinator's
totals are the sums of the pods' own books."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import anyio
import pytest
import zmq.asyncio

from aiperf.comms import DealerSocket, PullSocket, PushSocket, RouterSocket
from aiperf.config import ConcurrencyPhase, FixedSchedulePhase
from aiperf.issuing.coordinator import PodCoordinator
from aiperf.issuing.engine import TimingManager
from aiperf.issuing.pod import PodIssuer
from aiperf.issuing.ports import TurnTiming
from aiperf.messages import (
    CancelCredits,
    Credit,
    CreditChannel,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    Phase,
    PodCounts,
    WorkerConnected,
)
from tests._pods import dealer, router

pytestmark = pytest.mark.anyio

PLAN = [ConcurrencyPhase(name="warmup", concurrency=2, requests=5),
        ConcurrencyPhase(name="profiling", concurrency=4, requests=31),
        FixedSchedulePhase(name="replay", kind="profiling", auto_offset=True)]
STAMPS = [1000.0 + 7 * i for i in range(9)]  # ms: the replay spans 56 ms


class Dataset:
    """Nine single-turn conversations with trace times."""

    def __len__(self) -> int:
        return len(STAMPS)

    def ids(self) -> list[str]:
        return [f"c{i}" for i in range(len(STAMPS))]

    def timestamps(self) -> list[float | None]:
        return list(STAMPS)

    def turns(self, index: int) -> Sequence[TurnTiming]:
        return [TurnTiming(None, STAMPS[index])]

    def close(self) -> None:
        pass


class NoEvents:
    async def publish(self, event: object) -> None:
        pass


async def fake_worker(ctx: zmq.asyncio.Context, folder: str, worker_id: str, seen: list[Credit], hold: bool, *,
                      task_status: anyio.abc.TaskStatus[None]) -> None:
    """Announce itself, then return every credit at once (every 10th fails); with `hold`, keep
    them until a `CancelCredits` and return them cancelled."""
    async with (DealerSocket[CreditChannel](ctx, identity=worker_id, decode=CreditChannel, channel="credits",
                                            connect=[f"ipc://{folder}/credits.ipc"]) as credits,
                PushSocket(ctx, channel="credit_returns", connect=[f"ipc://{folder}/returns.ipc"]) as push):
        await push.send(WorkerConnected(worker_id=worker_id))
        task_status.started()
        held: list[Credit] = []
        while True:
            message = await credits.recv()
            if isinstance(message, Credit):
                seen.append(message)
                if hold:
                    held.append(message)
                else:
                    await push.send(CreditReturn.of(message, worker_id=worker_id, ok=message.num % 10 != 9))
            elif isinstance(message, CancelCredits):
                for credit in held:
                    await push.send(CreditReturn.of(credit, worker_id=worker_id, ok=False, cancelled=True))
                held.clear()


async def pod(ctx: zmq.asyncio.Context, ipc_dir: str, pod_id: str, seen: list[Credit], issuers: list[PodIssuer],
              hold: bool = False, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """A pod: its engine on its own sockets, two local workers, a `PodIssuer` to the coordinator."""
    folder = f"{ipc_dir}/{pod_id}"
    await anyio.Path(folder).mkdir()
    async with (RouterSocket[CreditUpstream](ctx, decode=CreditUpstream, channel="credits",
                                             bind=[f"ipc://{folder}/credits.ipc"]) as credits,
                PullSocket[CreditReturnChannel](ctx, decode=CreditReturnChannel, channel="credit_returns",
                                                bind=[f"ipc://{folder}/returns.ipc"]) as returns,
                dealer(ctx, ipc_dir, pod_id) as link, anyio.create_task_group() as tg):
        engine = TimingManager(service_id=f"{pod_id}-issuer", phases=[], seed=None, expected_workers=2,
                               registration_timeout_s=10, credits=credits, returns=returns, events=NoEvents(),
                               open_conversations=lambda _: Dataset(), audit_interval_s=None)
        for w in range(2):
            await tg.start(fake_worker, ctx, folder, f"{pod_id}-w{w}", seen, hold)
        issuer = PodIssuer(pod_id=pod_id, engine=engine, link=link, report_interval_s=0.01)
        issuers.append(issuer)
        await tg.start(issuer.run, "unused")
        task_status.started()


async def test_two_pods_issue_the_whole_plan_between_them(ipc_dir: str) -> None:
    seen: dict[str, list[Credit]] = {"pod-0": [], "pod-1": []}
    issuers: list[PodIssuer] = []
    ctx = zmq.asyncio.Context()
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            coordinator = PodCoordinator(router=sock, phases=PLAN, seed=3, expected_pods=2,
                                         registration_timeout_s=10, check_every_s=0.05)
            await tg.start(coordinator.run)
            with anyio.fail_after(30):
                for pod_id, credits in seen.items():
                    await tg.start(pod, ctx, ipc_dir, pod_id, credits, issuers)
                assert await coordinator.wait_registered() == 2
                assert [p.workers for p in coordinator.pods.values()] == [2, 2]
                totals = await coordinator.start()
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)

    warmup, profiling, replay = totals.phases
    assert not totals.cancelled
    accounting = totals.accounting()  # what ProfileFinished would carry: the replay replaced profiling
    assert list(accounting.phases) == [Phase.WARMUP, Phase.PROFILING] and not accounting.cancelled
    last = accounting.phases[Phase.PROFILING]
    assert (last.issued, last.returned, last.ok, last.lost) == (9, 9, 9, 0)
    assert replay.start_ns < last.end_ns and last.start_wall_ns < last.end_wall_ns
    assert warmup.counts == PodCounts(issued=5, ok=5, sent=5)  # nums 0-2 and 0-1: none is a 10th
    assert profiling.counts == PodCounts(issued=31, ok=29, failed=2, sent=31)  # pod-0: nums 0-15, pod-1: 0-14; num 9 fails
    assert replay.counts == PodCounts(issued=9, ok=9, sent=9)
    for book in totals.phases:  # the coordinator's per-pod counters are the pods' own books
        for issuer in issuers:
            own = issuer.accountings[book.index]
            assert book.per_pod[issuer.pod_id] == PodCounts(issued=own.issued, ok=own.ok, failed=own.failed,
                                                            sent=own.sent)
    by_phase = {(pod_id, c.phase, c.conversation_id) for pod_id, credits in seen.items() for c in credits}
    assert len([c for credits in seen.values() for c in credits if c.phase is Phase.WARMUP]) == 5
    replayed = sorted(((pod_id, cid) for pod_id, phase, cid in by_phase if phase is Phase.PROFILING
                       and any(c.scheduled_at_ns for c in seen[pod_id] if c.conversation_id == cid)))
    # entry k of the schedule's order went to pod k % 2, each exactly once
    assert replayed == sorted((f"pod-{k % 2}", f"c{k}") for k in range(9))
    sched = sorted(c.scheduled_at_ns for credits in seen.values() for c in credits if c.scheduled_at_ns)
    assert len(sched) == 9
    gaps = [b - a for a, b in itertools.pairwise(sched)]
    assert all(g > 0 for g in gaps)  # one timeline across the pods, not two from their own zeros


async def test_a_cancel_reaches_the_pods_engines_and_their_credits_come_back_cancelled(ipc_dir: str) -> None:
    seen: dict[str, list[Credit]] = {"pod-0": [], "pod-1": []}
    issuers: list[PodIssuer] = []
    ctx = zmq.asyncio.Context()
    try:
        async with router(ctx, ipc_dir) as sock, anyio.create_task_group() as tg:
            coordinator = PodCoordinator(router=sock, phases=PLAN[1:2], seed=None, expected_pods=2,
                                         registration_timeout_s=10, check_every_s=0.05)
            await tg.start(coordinator.run)
            with anyio.fail_after(30):
                for pod_id, credits in seen.items():
                    await tg.start(pod, ctx, ipc_dir, pod_id, credits, issuers, True)
                await coordinator.wait_registered()

                async def cancel_once_all_out() -> None:  # each pod's 2 users hold a credit
                    while sum(map(len, seen.values())) < 4:
                        await anyio.sleep(0.01)
                    coordinator.cancel("user")

                tg.start_soon(cancel_once_all_out)
                totals = await coordinator.start()
            tg.cancel_scope.cancel()
    finally:
        ctx.destroy(linger=0)
    assert totals.cancelled and totals.stopped_reason == "user"
    assert totals.phases[0].counts.issued == totals.phases[0].counts.cancelled == 4
    assert all(issuer.accountings[0].cancelled == 2 for issuer in issuers)
    run = totals.accounting()
    assert run.cancelled and run.stopped_reason == "user" and run.phases[Phase.PROFILING].stopped_reason == "user"
    assert run.phases[Phase.PROFILING].returned == 4
