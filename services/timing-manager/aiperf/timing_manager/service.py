"""Turns the load plan into credits (closed loop, request rate, fixed schedule) and knows
every credit in flight; a phase ends when all its credits are back or declared lost.

Control protocol: docs/run-protocol.md (`ProfileConfigure`, `ProfileStart`, `ProfileCancel`,
`ServiceCommand("worker_lost")`).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from aiperf.comms import BadMessage, PeerUnreachable
from aiperf.config import ProfileOptions
from aiperf.messages import (
    CancelCredits,
    Command,
    Credit,
    CreditReturn,
    Event,
    FirstToken,
    Phase,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    ProfileCancel,
    ProfileConfigure,
    ProfileStart,
    ServiceCommand,
    TimePong,
    WorkerConnected,
    WorkerLeaving,
)
from aiperf.runtime import GiveUp, UserError
from aiperf.timing_manager.ledger import InFlight, PhaseLedger
from aiperf.timing_manager.plan import PhasePlan, build_plans
from aiperf.timing_manager.ports import (
    Clock,
    Conversations,
    CreditRouter,
    EventSink,
    OpenConversations,
    ReturnSource,
    Sleep,
    TurnTiming,
)
from aiperf.timing_manager.schedule import NS_PER_S, arrival_offsets_ns, fixed_offsets_ns
from aiperf.timing_manager.workers import WorkerPool

log = structlog.get_logger("aiperf.timing_manager")

NO_WORKERS = "no workers left"
CANCELLED = "cancelled"


class TimingManager:
    """Issues credits per the load plan to the least-loaded connected worker, answers clock
    pings, and accounts for every credit.

    `run` serves pings and returns until cancelled; the run itself is driven by `handle`
    (commands arrive in their own tasks, so `ProfileCancel` and `worker_lost` act on a
    running `ProfileStart`). Open-loop and fixed-schedule credits are sent `send_ahead_ns`
    before `scheduled_at_ns` so the worker can wait for the exact time locally. After a
    `CancelCredits`, credits still out after `cancel_drain_s` are counted as lost.
    """

    def __init__(self, *, service_id: str, profile: ProfileOptions | None, expected_workers: int,
                 registration_timeout_s: float, credits: CreditRouter, returns: ReturnSource,
                 events: EventSink, open_conversations: OpenConversations,
                 clock: Clock = time.perf_counter_ns, wall_clock: Clock = time.time_ns,
                 sleep: Sleep = anyio.sleep, send_ahead_ns: int = 2_000_000,
                 tick_ns: int = 0, cancel_drain_s: float = 10.0) -> None:
        self.service_id = service_id
        self._profile, self._expected = profile, expected_workers
        self._registration_timeout_s = registration_timeout_s
        self._credits, self._returns, self._events = credits, returns, events
        self._open_conversations = open_conversations
        self._clock, self._wall_clock, self._sleep = clock, wall_clock, sleep
        self._send_ahead_ns, self._tick_ns, self._cancel_drain_s = send_ahead_ns, tick_ns, cancel_drain_s
        self.pool = WorkerPool()
        self._conversations: Conversations | None = None
        self._plans: list[PhasePlan] = []
        self._ledgers: dict[Phase, PhaseLedger] = {}
        self._current: PhaseLedger | None = None
        self._cancel = anyio.Event()
        self._running = False

    # -- the service ---------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve pings and credit returns until cancelled; ready at once."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._serve_pings)
                tg.start_soon(self._serve_returns)
                task_status.started()
        finally:
            if self._conversations is not None:
                self._conversations.close()
                self._conversations = None

    async def handle(self, command: Command) -> dict[str, Any]:
        """Obey one control command (see docs/run-protocol.md); raises on misuse."""
        match command:
            case ProfileConfigure(options=options):
                return await self.configure(str(options.get("dataset_dir", "")))
            case ProfileStart():
                return await self.start()
            case ProfileCancel(reason=reason):
                self.cancel(reason or "ProfileCancel")
                return {}
            case ServiceCommand(name="worker_lost", args=args):
                return {"lost": self.worker_lost(str(args["worker_id"]))}
            case ServiceCommand(name=name):
                raise GiveUp(f"ServiceCommand {name!r} is not supported by the timing-manager")
            case _:
                raise GiveUp(f"{type(command).__name__} is not supported by the timing-manager")

    async def configure(self, dataset_dir: str) -> dict[str, Any]:
        """Read the dataset index, build the plan, and wait (registration timeout) until the
        expected workers are connected. Returns `{"workers": n}`; raises `UserError` for an
        unusable profile or dataset and `GiveUp` when workers are missing at the deadline."""
        if self._running:
            raise GiveUp("ProfileConfigure while a profile run is in progress")
        if self._profile is None:
            raise UserError("the run config has no profile (mode bringup): nothing to time")
        if not dataset_dir:
            raise GiveUp("ProfileConfigure for the timing-manager needs options.dataset_dir")
        conversations = self._open_conversations(dataset_dir)
        if len(conversations) == 0:
            conversations.close()
            raise UserError(f"dataset {dataset_dir} has no conversations; check the input file")
        plans = build_plans(self._profile)
        if self._profile.fixed_schedule:
            fixed_offsets_ns(conversations.timestamps())  # validates: every entry timed
        if self._conversations is not None:
            self._conversations.close()
        self._conversations, self._plans = conversations, plans
        self._cancel, self._ledgers = anyio.Event(), {}
        log.info("timing.configured", conversations=len(conversations),
                 phases=[str(p.phase) for p in plans], mode=plans[-1].mode)
        with anyio.move_on_after(self._registration_timeout_s):
            while len(self.pool) < self._expected:
                await self.pool.wait_changed()
        if len(self.pool) < self._expected:
            raise GiveUp(f"only {len(self.pool)} of {self._expected} workers connected to the "
                         f"timing-manager within {self._registration_timeout_s}s")
        return {"workers": len(self.pool)}

    async def start(self) -> dict[str, Any]:
        """Run every phase of the plan; returns the accounting once each credit came back or
        was declared lost (`"cancelled": true` after `ProfileCancel`)."""
        if self._conversations is None:
            raise GiveUp("ProfileStart before ProfileConfigure")
        if self._running:
            raise GiveUp("ProfileStart while a profile run is in progress")
        self._running = True
        try:
            for plan in self._plans:
                if self._cancel.is_set():
                    break
                ledger = await self._run_phase(plan, self._conversations)
                if ledger.stopped_reason == NO_WORKERS:
                    break
        finally:
            self._running = False
            self._current = None
        phases = {str(phase): ledger.accounting() for phase, ledger in self._ledgers.items()}
        result: dict[str, Any] = {"cancelled": self._cancel.is_set(), "phases": phases}
        reasons = [p["stopped_reason"] for p in phases.values() if "stopped_reason" in p]
        if reasons:  # the run-level view of the records-manager: why issuing ended early
            result["stopped_reason"] = reasons[-1]
        return result

    def cancel(self, reason: str) -> None:
        """Stop issuing; the running phase cancels in-flight requests and `start` returns with
        `"cancelled": true`. Idempotent; before `start` it makes `start` issue nothing."""
        log.info("timing.cancel", reason=reason)
        self._cancel.set()
        if self._current is not None:
            self._current.stop(CANCELLED)

    def worker_lost(self, worker_id: str) -> int:
        """Declare `worker_id`'s in-flight credits lost and stop dispatching to it; returns how
        many were lost. With no worker left the running phase stops issuing."""
        self.pool.remove(worker_id)
        lost = 0
        for ledger in self._ledgers.values():
            for entry in [e for e in ledger.in_flight.values() if e.worker == worker_id]:
                if ledger.declare_lost(entry.num) is not None:
                    lost += 1
        log.warning("timing.worker_lost", worker=worker_id, lost=lost, workers_left=len(self.pool))
        if not self.pool and self._current is not None:
            self._current.stop(NO_WORKERS)
        return lost

    # -- pings and returns ------------------------------------------------------------

    async def _serve_pings(self) -> None:
        while True:
            try:
                peer, ping = await self._credits.recv()
            except BadMessage as exc:
                log.warning("timing.bad_message", channel=exc.channel, peer=exc.peer, reason=exc.reason)
                continue
            pong = TimePong(seq=ping.seq, ping_sent_at_ns=ping.sent_at_ns, received_at_ns=self._clock())
            try:
                await self._credits.send(peer, pong)
            except PeerUnreachable:
                log.warning("timing.pong_unreachable", worker=peer.decode(errors="replace"))

    async def _serve_returns(self) -> None:
        while True:
            try:
                message = await self._returns.recv()
            except BadMessage as exc:
                log.warning("timing.bad_message", channel=exc.channel, peer=exc.peer, reason=exc.reason)
                continue
            match message:
                case CreditReturn():
                    self._on_return(message)
                case WorkerConnected(worker_id=worker_id):
                    if self.pool.add(worker_id):
                        log.info("timing.worker_connected", worker=worker_id, workers=len(self.pool))
                case WorkerLeaving(worker_id=worker_id):
                    if self.pool.remove(worker_id):
                        log.info("timing.worker_leaving", worker=worker_id, workers=len(self.pool))
                case FirstToken():
                    pass  # reserved for prefill-aware pacing

    def _on_return(self, ret: CreditReturn) -> None:
        ledger = self._ledgers.get(ret.phase)
        entry = ledger.settle(ret) if ledger is not None else None
        if entry is None:
            log.warning("timing.unknown_return", phase=str(ret.phase), num=ret.num, worker=ret.worker_id)
            return
        self.pool.release(entry.worker)

    # -- phases -------------------------------------------------------------------------

    async def _run_phase(self, plan: PhasePlan, conversations: Conversations) -> PhaseLedger:
        cancel_delay_ns = round(plan.cancel_delay_s * NS_PER_S)
        ledger = PhaseLedger(plan.phase, count=plan.count,
                             concurrency_cap=plan.concurrency if plan.mode != "closed" else None,
                             cancel_rate_pct=plan.cancel_rate_pct, cancel_delay_ns=cancel_delay_ns,
                             seed=plan.seed)
        self._ledgers[plan.phase] = self._current = ledger
        ledger.start_ns, ledger.start_wall_ns = self._clock(), self._wall_clock()
        log.info("timing.phase_started", phase=str(plan.phase), mode=plan.mode, count=plan.count,
                 duration_s=plan.duration_s, concurrency=plan.concurrency, rate=plan.rate)
        await self._publish(PhaseStarted(phase=plan.phase, started_at_ns=ledger.start_ns,
                                         expected_credits=plan.count, expected_duration_s=plan.duration_s))
        if self._cancel.is_set():
            ledger.stop(CANCELLED)
        with ledger.issuing:
            async with anyio.create_task_group() as tg:
                if plan.duration_s is not None:
                    tg.start_soon(self._stop_after, ledger, ledger.start_ns + round(plan.duration_s * NS_PER_S))
                async with anyio.create_task_group() as issuers:
                    if plan.mode == "closed":
                        cursor = itertools.cycle(range(len(conversations)))
                        for _ in range(plan.concurrency or 1):
                            issuers.start_soon(self._session, ledger, conversations, cursor)
                    else:
                        issuers.start_soon(self._pace, ledger, plan, conversations, issuers)
                tg.cancel_scope.cancel()  # the duration timer
        ledger.finish_sending()
        log.info("timing.phase_sending_complete", phase=str(plan.phase), issued=ledger.issued,
                 reason=ledger.stopped_reason or "count")
        await self._publish(PhaseSendingComplete(phase=plan.phase, issued=ledger.issued, at_ns=self._clock()))
        await self._drain(ledger, plan)
        ledger.end_ns, ledger.end_wall_ns = self._clock(), self._wall_clock()
        log.info("timing.phase_complete", phase=str(plan.phase), **ledger.accounting())
        await self._publish(PhaseComplete(phase=plan.phase, issued=ledger.issued, returned=ledger.returned,
                                          lost=ledger.lost, at_ns=ledger.end_ns))
        return ledger

    async def _stop_after(self, ledger: PhaseLedger, deadline_ns: int) -> None:
        await self._sleep_until(deadline_ns)
        ledger.stop("duration")

    async def _drain(self, ledger: PhaseLedger, plan: PhasePlan) -> None:
        """Wait for the phase's credits: unbounded normally, `grace_s` after a duration stop;
        then (cancel or grace over) send `CancelCredits` and wait `cancel_drain_s` at most,
        declaring what is still out lost."""
        if not self._cancel.is_set():
            bound = plan.grace_s if ledger.stopped_reason == "duration" else None
            await self._first_of(ledger.drained.wait, self._cancel.wait,
                                 *([] if bound is None else [lambda: self._sleep(bound)]))
        if ledger.drained.is_set():
            return
        reason = "benchmark cancelled" if self._cancel.is_set() else "grace period over"
        skipped = await self._credits.broadcast([w.encode() for w in self._workers_holding(ledger)],
                                                CancelCredits(phase=ledger.phase, reason=reason))
        log.info("timing.cancel_credits", phase=str(ledger.phase), reason=reason,
                 in_flight=len(ledger.in_flight), unreachable=len(skipped))
        await self._first_of(ledger.drained.wait, lambda: self._sleep(self._cancel_drain_s))
        for num in list(ledger.in_flight):
            entry = ledger.declare_lost(num)
            if entry is not None:
                self.pool.release(entry.worker)
        if ledger.lost:
            log.warning("timing.credits_lost", phase=str(ledger.phase), lost=ledger.lost)

    def _workers_holding(self, ledger: PhaseLedger) -> list[str]:
        """Connected workers plus any departed one that still holds credits of `ledger`."""
        holders = dict.fromkeys(self.pool.workers)
        holders.update(dict.fromkeys(e.worker for e in ledger.in_flight.values()))
        return list(holders)

    # -- issuing ------------------------------------------------------------------------

    async def _session(self, ledger: PhaseLedger, conversations: Conversations, cursor: Iterator[int]) -> None:
        """One closed-loop user: conversations in dataset order (shared cursor), each turn
        sent to the same worker once the previous one returned and its delay passed."""
        while ledger.may_issue():
            index = next(cursor)
            worker: str | None = None
            for turn, timing in enumerate(conversations.turns(index)):
                if turn and timing.delay_ms:
                    await self._sleep(timing.delay_ms / 1000)
                if not ledger.may_issue():
                    return
                entry = await self._issue(ledger, conversations, index, turn, prefer=worker)
                if entry is None:
                    return
                worker = entry.worker
                if not ledger.may_issue():
                    return  # the budget is spent: sending is complete, do not wait here
                await entry.done.wait()
                if entry.outcome == "lost":
                    break

    async def _pace(self, ledger: PhaseLedger, plan: PhasePlan, conversations: Conversations,
                    tg: TaskGroup) -> None:
        """Open loop or fixed schedule: send first turns at their arrival times (early by
        `send_ahead_ns`); later turns of a conversation follow in their own task."""
        t0 = self._clock() + self._send_ahead_ns
        for offset_ns, index in self._arrivals(plan, conversations):
            if not ledger.may_issue():
                return
            scheduled = t0 + offset_ns
            await self._sleep_until(scheduled - self._send_ahead_ns)
            entry = await self._issue_slotted(ledger, conversations, index, 0, scheduled=scheduled)
            if entry is None:
                return
            turns = conversations.turns(index)
            if len(turns) > 1:
                tg.start_soon(self._follow_up, ledger, plan, conversations, entry, turns, t0)

    def _arrivals(self, plan: PhasePlan, conversations: Conversations) -> Iterator[tuple[int, int]]:
        if plan.mode == "fixed":
            return iter(fixed_offsets_ns(conversations.timestamps()))
        assert plan.rate is not None
        rng = random.Random(f"{plan.seed}:arrivals" if plan.seed is not None else None)
        offsets = arrival_offsets_ns(rate=plan.rate, mode=plan.rate_mode, smoothness=plan.smoothness, rng=rng)
        return zip(offsets, itertools.cycle(range(len(conversations))), strict=False)

    async def _follow_up(self, ledger: PhaseLedger, plan: PhasePlan, conversations: Conversations,
                         entry: InFlight, turns: Sequence[TurnTiming], t0: int) -> None:
        """Turns 1.. of an open-loop conversation, each after the previous returned."""
        base_ms = min((t for t in conversations.timestamps() if t is not None), default=0.0)
        for turn in range(1, len(turns)):
            await entry.done.wait()
            if entry.outcome == "lost":
                return
            timing, scheduled = turns[turn], 0
            if plan.mode == "fixed" and timing.timestamp_ms is not None:
                scheduled = t0 + round((timing.timestamp_ms - base_ms) * 1_000_000)
                await self._sleep_until(scheduled - self._send_ahead_ns)
            elif timing.delay_ms:
                await self._sleep(timing.delay_ms / 1000)
            if not ledger.may_issue():
                return
            next_entry = await self._issue_slotted(ledger, conversations, entry.conversation, turn,
                                                   scheduled=scheduled, prefer=entry.worker)
            if next_entry is None or not ledger.may_issue():
                return
            entry = next_entry

    async def _issue_slotted(self, ledger: PhaseLedger, conversations: Conversations, index: int, turn: int,
                             *, scheduled: int, prefer: str | None = None) -> InFlight | None:
        """`_issue` after waiting for a free slot when the phase has a concurrency cap."""
        if ledger.slots is None:
            return await self._issue(ledger, conversations, index, turn, prefer=prefer, scheduled=scheduled)
        await ledger.slots.acquire()
        if not ledger.may_issue():
            ledger.slots.release()
            return None
        return await self._issue(ledger, conversations, index, turn, prefer=prefer, scheduled=scheduled,
                                 holds_slot=True)

    async def _issue(self, ledger: PhaseLedger, conversations: Conversations, index: int, turn: int, *,
                     prefer: str | None, scheduled: int = 0, holds_slot: bool = False) -> InFlight | None:
        """Number, record and send one credit to `prefer` (if still connected) or the
        least-loaded worker; None (and the phase stopped) when no worker is left. A worker
        found unreachable leaves the pool and the same credit goes to another one. A slot
        held by the caller (`holds_slot`) is released whenever None is returned."""
        worker = self.pool.pick(prefer)
        if worker is None:
            if holds_slot and ledger.slots is not None:
                ledger.slots.release()
            ledger.stop(NO_WORKERS)
            return None
        entry = ledger.open(worker=worker, conversation=index, turn=turn, holds_slot=holds_slot)
        self.pool.charge(worker)
        should_cancel = ledger.should_cancel()
        conversation_id = conversations.ids()[index]
        with anyio.CancelScope(shield=True):  # a credit is either sent or given back, never half
            while True:
                now = self._clock()
                credit = Credit(phase=ledger.phase, num=entry.num, conversation_id=conversation_id,
                                turn_index=turn, issued_at_ns=now, scheduled_at_ns=scheduled,
                                should_cancel=should_cancel,
                                cancel_after_ns=ledger.cancel_delay_ns if should_cancel else 0)
                try:
                    await self._credits.send(entry.worker.encode(), credit)
                except PeerUnreachable:
                    log.warning("timing.worker_unreachable", worker=entry.worker, num=entry.num)
                    self.pool.remove(entry.worker)
                    replacement = self.pool.pick()
                    if replacement is None:
                        ledger.declare_lost(entry.num)  # releases its slot
                        ledger.stop(NO_WORKERS)
                        return None
                    entry.worker = replacement
                    self.pool.charge(replacement)
                    continue
                break
        if scheduled:
            ledger.lags_ns.append(now - scheduled)
        return entry

    async def _sleep_until(self, deadline_ns: int) -> None:
        """Sleep until `deadline_ns`; with `tick_ns` > 0 in steps of at most `tick_ns` (keeps
        the loop awake; an experiment against oversleeping on a CPU-starved host, not shown
        to help on the 2-core dev box)."""
        while (delay := deadline_ns - self._clock()) > 0:
            await self._sleep((min(delay, self._tick_ns) if self._tick_ns > 0 else delay) / NS_PER_S)

    async def _first_of(self, *waits: Callable[[], Awaitable[object]]) -> None:
        """Return as soon as one of `waits` completes (the others are cancelled)."""
        async with anyio.create_task_group() as tg:
            async def one(wait: Callable[[], Awaitable[object]]) -> None:
                await wait()
                tg.cancel_scope.cancel()

            for wait in waits:
                tg.start_soon(one, wait)

    async def _publish(self, event: Event) -> None:
        try:
            await self._events.publish(event)
        except Exception as exc:  # best effort: the control channel carries what must arrive
            log.warning("timing.publish_failed", event=type(event).__name__, error=str(exc))

