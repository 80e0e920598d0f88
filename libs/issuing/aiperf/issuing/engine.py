"""Turns the load plan into credits and knows every credit in flight; a phase ends when all its
credits are back or declared lost. When credits go out is each phase's strategy
(`aiperf.issuing.strategies`); where they go and the books, `CreditIssuer`.

Control protocol: docs/run-protocol.md (`ProfileConfigure`, `ProfileStart`, `ProfileCancel`,
`WorkerLost`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from aiperf.comms import BadMessage, PeerUnreachable
from aiperf.config import FixedSchedulePhase, Phase, RatePhase
from aiperf.issuing.audit import CreditAuditor
from aiperf.issuing.issuer import NO_WORKERS, CreditIssuer
from aiperf.issuing.ledger import PhaseLedger
from aiperf.issuing.ports import (
    Clock,
    Conversations,
    CreditRouter,
    EventSink,
    OpenConversations,
    ReturnSource,
    Sleep,
)
from aiperf.issuing.schedule import NS_PER_S, fixed_offsets_ns
from aiperf.issuing.strategies import ramp_open, strategy_for
from aiperf.issuing.workers import WorkerPool
from aiperf.messages import (
    CancelCredits,
    Command,
    CreditReturn,
    CreditsLost,
    Event,
    FirstToken,
    HeldCredits,
    PhaseAccounting,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    ProfileCancel,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    Reply,
    RunAccounting,
    TimePong,
    WorkerConnected,
    WorkerLeaving,
    WorkerLost,
)
from aiperf.messages import Phase as PhaseTag
from aiperf.runtime import GiveUp, UnknownCommand, UserError

log = structlog.get_logger("aiperf.issuing")

CANCELLED = "cancelled"


class TimingManager:
    """Issues credits per the load plan to the least-loaded connected worker, answers clock
    pings, and accounts for every credit.

    `run` serves pings and returns until cancelled; the run itself is driven by `handle`
    (commands arrive in their own tasks, so `ProfileCancel` and `WorkerLost` act on a
    running `ProfileStart`). Open-loop and fixed-schedule credits are sent `send_ahead_ns`
    before `scheduled_at_ns` so the worker can wait for the exact time locally. After a
    `CancelCredits`, credits still out after `cancel_drain_s` are counted as lost. Every
    `audit_interval_s` (None: never) the workers are audited for credits lost on the wire
    (`aiperf.issuing.audit`). With `urls` endpoint URLs, each conversation goes to the next URL
    in turn (`CreditIssuer`).
    """

    def __init__(self, *, service_id: str, phases: Sequence[Phase], seed: int | None, expected_workers: int,
                 registration_timeout_s: float, credits: CreditRouter, returns: ReturnSource,
                 events: EventSink, open_conversations: OpenConversations,
                 clock: Clock = time.perf_counter_ns, wall_clock: Clock = time.time_ns,
                 sleep: Sleep = anyio.sleep, send_ahead_ns: int = 2_000_000,
                 tick_ns: int = 0, cancel_drain_s: float = 10.0, audit_interval_s: float | None = 2.0,
                 urls: int = 1) -> None:
        self.service_id = service_id
        self._phases, self._seed, self._expected = list(phases), seed, expected_workers
        self._registration_timeout_s = registration_timeout_s
        self._credits, self._returns, self._events = credits, returns, events
        self._open_conversations = open_conversations
        self._clock, self._wall_clock, self._sleep = clock, wall_clock, sleep
        self._send_ahead_ns, self._tick_ns, self._cancel_drain_s = send_ahead_ns, tick_ns, cancel_drain_s
        self._urls = urls
        self.pool = WorkerPool()
        self._conversations: Conversations | None = None
        self._ledgers: dict[PhaseTag, PhaseLedger] = {}
        self._current: PhaseLedger | None = None
        self._cancel = anyio.Event()
        self._running = False
        self._auditor = CreditAuditor(ledgers=self._ledgers.values, pool=self.pool, credits=credits,
                                      clock=clock, sleep=sleep, interval_s=audit_interval_s or 0)
        self._audits = audit_interval_s is not None

    # -- the service ---------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve pings and credit returns until cancelled; ready at once."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._serve_pings)
                tg.start_soon(self._serve_returns)
                if self._audits:
                    tg.start_soon(self._auditor.run)
                task_status.started()
        finally:
            if self._conversations is not None:
                self._conversations.close()
                self._conversations = None

    async def handle(self, command: Command[Any]) -> Reply | None:
        """Obey one control command (see docs/run-protocol.md); raises on misuse."""
        match command:
            case ProfileConfigure(dataset_dir=dataset_dir):
                await self.configure(dataset_dir)
                return None
            case ProfileStart():
                return ProfileFinished(accounting=await self.start())
            case ProfileCancel(reason=reason):
                self.cancel(reason or "ProfileCancel")
                return None
            case WorkerLost(worker_id=worker_id):
                return CreditsLost(lost=self.worker_lost(worker_id))
        raise UnknownCommand(f"the timing-manager does not handle {type(command).__name__}")

    async def configure(self, dataset_dir: str) -> int:
        """Read the dataset index and wait (registration timeout) until the expected workers are
        connected; returns how many are. Raises `UserError` for an unusable dataset (empty, or
        missing trace timestamps for a fixed schedule) and `GiveUp` when workers are missing at
        the deadline or a run is in progress."""
        if self._running:
            raise GiveUp("ProfileConfigure while a profile run is in progress")
        conversations = self._open_conversations(dataset_dir)
        if len(conversations) == 0:
            conversations.close()
            raise UserError(f"dataset {dataset_dir} has no conversations; check the input file")
        for phase in self._phases:
            if isinstance(phase, FixedSchedulePhase):  # validates: every entry timed, the window not empty
                try:
                    fixed_offsets_ns(conversations.timestamps(), start_ms=phase.start_offset, end_ms=phase.end_offset)
                except UserError:
                    conversations.close()
                    raise
        if self._conversations is not None:
            self._conversations.close()
        self._conversations = conversations
        self._cancel = anyio.Event()
        self._ledgers.clear()  # the auditor reads this very dict
        log.info("timing.configured", conversations=len(conversations),
                 phases=[f"{p.name}:{type(p).__name__}" for p in self._phases])
        with anyio.move_on_after(self._registration_timeout_s):
            while len(self.pool) < self._expected:
                await self.pool.wait_changed()
        if len(self.pool) < self._expected:
            raise GiveUp(f"only {len(self.pool)} of {self._expected} workers connected to the "
                         f"timing-manager within {self._registration_timeout_s}s")
        return len(self.pool)

    async def start(self) -> RunAccounting:
        """Run every phase; returns the accounting once each credit came back or was declared
        lost (`cancelled` after `ProfileCancel`)."""
        if self._conversations is None:
            raise GiveUp("ProfileStart before ProfileConfigure")
        if self._running:
            raise GiveUp("ProfileStart while a profile run is in progress")
        self._running = True
        try:
            for phase in self._phases:
                if self._cancel.is_set():
                    break
                ledger = await self._run_phase(phase, self._conversations)
                if ledger.stopped_reason == NO_WORKERS:
                    break
        finally:
            self._running = False
            self._current = None
        phases = {tag: ledger.accounting() for tag, ledger in self._ledgers.items()}
        reasons = [p.stopped_reason for p in phases.values() if p.stopped_reason]
        return RunAccounting(phases=phases, cancelled=self._cancel.is_set(),
                             stopped_reason=reasons[-1] if reasons else "")

    @property
    def conversations(self) -> Conversations | None:
        """The dataset `configure` opened (None before)."""
        return self._conversations

    @property
    def current(self) -> PhaseLedger | None:
        """The books of the phase running now (None when none is)."""
        return self._current

    async def run_phase(self, phase: Phase, *, conversations: Conversations | None = None,
                        seed: int | None = None) -> PhaseAccounting:
        """Run one phase (not necessarily one of the plan's: a worker pod runs its slices this
        way) over `conversations` (default: the configured dataset) with `seed` (default: the
        run's); returns its accounting once each credit came back or was declared lost. Raises
        `GiveUp` before `configure` or while another phase or run is in progress."""
        if self._conversations is None:
            raise GiveUp("run_phase before ProfileConfigure")
        if self._running:
            raise GiveUp("run_phase while a profile run is in progress")
        self._running = True
        try:
            ledger = await self._run_phase(phase, self._conversations if conversations is None else conversations,
                                           seed=self._seed if seed is None else seed)
        finally:
            self._running = False
            self._current = None
        return ledger.accounting()

    def lags_ns(self, phase: PhaseTag) -> list[int]:
        """How late each scheduled credit of the last run of phase `phase` was issued after its
        planned time (empty when none was scheduled or the phase did not run)."""
        ledger = self._ledgers.get(phase)
        return [] if ledger is None else list(ledger.lags_ns)

    def cancel(self, reason: str) -> None:
        """Stop issuing; the running phase cancels in-flight requests and `start` returns with
        `"cancelled": true`. Idempotent; before `start` it makes `start` issue nothing."""
        log.info("timing.cancel", reason=reason)
        self._cancel.set()
        if self._current is not None:
            self._current.stop(CANCELLED)

    def knows(self, worker_id: str) -> bool:
        """Whether `worker_id` is connected or still holds credits (O(credits in flight) when
        it is not connected)."""
        return worker_id in self.pool.workers or any(
            e.worker == worker_id for ledger in self._ledgers.values() for e in ledger.in_flight.values())

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
                case HeldCredits():
                    self._auditor.on_held(message)
                case FirstToken(phase=phase, num=num):
                    if (ledger := self._ledgers.get(phase)) is not None:
                        ledger.first_token(num)

    def _on_return(self, ret: CreditReturn) -> None:
        ledger = self._ledgers.get(ret.phase)
        entry = ledger.settle(ret) if ledger is not None else None
        if entry is None:
            log.warning("timing.unknown_return", phase=str(ret.phase), num=ret.num, worker=ret.worker_id)
            return
        self.pool.release(entry.worker)

    # -- phases -------------------------------------------------------------------------

    async def _run_phase(self, phase: Phase, conversations: Conversations, *, seed: int | None = None) -> PhaseLedger:
        seed = self._seed if seed is None else seed
        tag = PhaseTag(phase.role)
        cancellation = phase.cancellation
        ledger = PhaseLedger(tag, count=phase.requests,
                             concurrency_cap=phase.concurrency if isinstance(phase, RatePhase) else None,
                             cancel_rate_pct=cancellation.rate,
                             cancel_delay_ns=round(cancellation.delay * NS_PER_S), seed=seed,
                             prefill_cap=phase.prefill_concurrency, sessions=phase.sessions)
        self._ledgers[tag] = self._current = ledger
        ledger.start_ns, ledger.start_wall_ns = self._clock(), self._wall_clock()
        log.info("timing.phase_started", phase=phase.name, type=type(phase).__name__, count=phase.requests,
                 duration_s=phase.duration, concurrency=phase.concurrency,
                 rate=phase.rate if isinstance(phase, RatePhase) else None)
        await self._publish(PhaseStarted(phase=tag, started_at_ns=ledger.start_ns,
                                         expected_credits=phase.requests, expected_duration_s=phase.duration,
                                         started_wall_ns=ledger.start_wall_ns))
        if self._cancel.is_set():
            ledger.stop(CANCELLED)
        issuer = CreditIssuer(ledger=ledger, pool=self.pool, credits=self._credits, conversations=conversations,
                              clock=self._clock, sleep=self._sleep, send_ahead_ns=self._send_ahead_ns,
                              tick_ns=self._tick_ns, urls=self._urls)
        with ledger.issuing:
            async with anyio.create_task_group() as tg:
                if phase.duration is not None:
                    deadline = ledger.start_ns + round(phase.duration * NS_PER_S)
                    tg.start_soon(self._stop_after, issuer, deadline)
                if ledger.prefill is not None and phase.prefill_ramp is not None:
                    await tg.start(ramp_open, issuer, ledger.prefill, phase.prefill_ramp.duration, anyio.CancelScope())
                await strategy_for(phase, seed=seed).run(issuer)
                tg.cancel_scope.cancel()  # the duration timer and the prefill ramp
        ledger.finish_sending()
        log.info("timing.phase_sending_complete", phase=phase.name, issued=ledger.issued,
                 reason=ledger.stopped_reason or "count")
        await self._publish(PhaseSendingComplete(phase=tag, issued=ledger.issued, at_ns=self._clock()))
        await self._drain(ledger, phase.grace_s)
        ledger.end_ns, ledger.end_wall_ns = self._clock(), self._wall_clock()
        log.info("timing.phase_complete", phase=phase.name, issued=ledger.issued, lost=ledger.lost)
        await self._publish(PhaseComplete(phase=tag, issued=ledger.issued, returned=ledger.returned,
                                          lost=ledger.lost, at_ns=ledger.end_ns))
        return ledger

    @staticmethod
    async def _stop_after(issuer: CreditIssuer, deadline_ns: int) -> None:
        await issuer.sleep_until(deadline_ns)
        issuer.ledger.stop("duration")

    async def _drain(self, ledger: PhaseLedger, grace_s: float) -> None:
        """Wait for the phase's credits: unbounded normally, `grace_s` after a duration stop;
        then (cancel or grace over) send `CancelCredits` and wait `cancel_drain_s` at most,
        declaring what is still out lost."""
        if not self._cancel.is_set():
            bound = grace_s if ledger.stopped_reason == "duration" else None
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

