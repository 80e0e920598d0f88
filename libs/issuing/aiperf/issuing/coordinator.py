"""`PodCoordinator`: the controller's side of a sharded run. Worker pods issue their own
workers' credits from their slice of the plan (`aiperf.issuing.pod.PodIssuer`); the
controller only hands out the slices and adds up the pods' counters, so its cost is per pod
and per report, never per request (docs/scale.md). Messages: `aiperf.messages.pods`.

A phase, step by step: the slices are cut among the pods registered and not lost
(`slice_phase`, pods in registration order), each pod gets its `PodPhaseStart`, and the phase
is complete when every one of them sent its final `PodReport` or was declared lost (silent for
`lost_after_s`: its last reported in-flight credits are counted as lost, and it gets no later
phase). The phase's totals are the exact sums of the pods' counters.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from aiperf.comms import BadMessage, PeerUnreachable
from aiperf.config import Phase
from aiperf.issuing.ports import Clock, EventSink, Sleep
from aiperf.issuing.slices import encode_slice, slice_phase
from aiperf.messages import (
    LAG_BUCKETS,
    Event,
    PhaseAccounting,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    PodCancel,
    PodCounts,
    PodDownstream,
    PodHello,
    PodPhaseStart,
    PodReport,
    PodUpstream,
    PodWorkerLost,
    RunAccounting,
    lag_bucket_upper_ns,
)
from aiperf.messages import Phase as PhaseTag
from aiperf.runtime import GiveUp

log = structlog.get_logger("aiperf.issuing.pods")

FIELDS = ("issued", "ok", "failed", "cancelled", "lost", "in_flight", "sent")
NO_PODS = "no pods left"


class PodRouter(Protocol):
    """The `pods` ROUTER (`aiperf.comms.RouterSocket`): slices and cancels out, addressed by
    pod identity; hellos and reports in. `send` raises `PeerUnreachable` for an unknown peer."""

    async def send(self, peer: bytes, message: PodDownstream) -> None: ...

    async def recv(self) -> tuple[bytes, PodUpstream]: ...


@dataclass(eq=False)
class _Pod:
    pod_id: str
    workers: int
    last_heard_ns: int
    lost: bool = False


def add_counts(a: PodCounts, b: PodCounts, sign: int = 1) -> PodCounts:
    """`a + b` field by field (`sign=-1`: `a - b`)."""
    return PodCounts(**{name: getattr(a, name) + sign * getattr(b, name) for name in FIELDS})


@dataclass(eq=False, kw_only=True)
class PodPhaseTotals:
    """One phase of a sharded run: `counts` is the exact sum of the pods' counters (`live` while
    it runs, totals once `done`); `pods` the pods it was cut among, `lost_pods` those declared
    lost in it, `reports` how many reports were taken."""

    index: int
    phase: PhaseTag
    pods: list[str]
    counts: PodCounts = field(default_factory=PodCounts)
    per_pod: dict[str, PodCounts] = field(default_factory=dict)
    seq: dict[str, int] = field(default_factory=dict)
    final: set[str] = field(default_factory=set)
    lost_pods: list[str] = field(default_factory=list)
    reports: int = 0
    lag_counts: list[int] = field(default_factory=lambda: [0] * LAG_BUCKETS)
    early_counts: list[int] = field(default_factory=lambda: [0] * LAG_BUCKETS)
    lag_max_ns: int | None = None
    start_ns: int = 0
    end_ns: int = 0
    start_wall_ns: int = 0
    end_wall_ns: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def pending(self) -> list[str]:
        """Pods that neither sent their final report nor were declared lost."""
        settled = self.final | set(self.lost_pods)
        return [p for p in self.pods if p not in settled]

    def take(self, pod_id: str, counts: PodCounts) -> None:
        """Replace `pod_id`'s counters with `counts`; the sum follows in O(1)."""
        old = self.per_pod.get(pod_id)
        total = self.counts if old is None else add_counts(self.counts, old, -1)
        self.counts = add_counts(total, counts)
        self.per_pod[pod_id] = counts

    def add_lags(self, late: Sequence[int], early: Sequence[int], max_ns: int) -> None:
        """Add a pod's schedule-lag histograms (its final report's) to the phase's: O(buckets)."""
        if not any(late) and not any(early):
            return
        for i, n in enumerate(late[:LAG_BUCKETS]):
            self.lag_counts[i] += n
        for i, n in enumerate(early[:LAG_BUCKETS]):
            self.early_counts[i] += n
        self.lag_max_ns = max_ns if self.lag_max_ns is None else max(self.lag_max_ns, max_ns)

    def lag_percentile_ns(self, q: float) -> int:
        """The `q`-th percentile (0..100) of the pods' schedule lags, read from the histograms
        as the bucket's bound nearest to "late" (an early one: minus its lower bound; a late one:
        its upper bound; so at most 19% later than the exact value), never above the largest
        lag; 0 when none was scheduled."""
        if self.lag_max_ns is None:
            return 0
        rank, seen = q / 100 * (sum(self.lag_counts) + sum(self.early_counts)), 0
        for i in range(LAG_BUCKETS - 1, -1, -1):  # the earliest first
            seen += (n := self.early_counts[i])
            if n and seen >= rank:
                return round(min(-lag_bucket_upper_ns(i - 1) if i else 0, self.lag_max_ns))
        for i, n in enumerate(self.lag_counts):
            seen += n
            if n and seen >= rank:
                return round(min(lag_bucket_upper_ns(i), self.lag_max_ns))
        return self.lag_max_ns

    def settle(self) -> None:
        """Set `done` once every pod is final or lost (O(1): the two are disjoint)."""
        if len(self.final) + len(self.lost_pods) >= len(self.pods):
            self.done.set()

    def accounting(self, stopped_reason: str = "") -> PhaseAccounting:
        """The phase as the timing-manager accounts for one (`PhaseAccounting`): the pods'
        sums, `returned = ok + failed + cancelled`, the coordinator's start and end times, the
        schedule lag's median and 99th percentile from the pods' histograms (`lag_percentile_ns`)."""
        c = self.counts
        return PhaseAccounting(issued=c.issued, returned=c.ok + c.failed + c.cancelled, sent=c.sent, ok=c.ok,
                               failed=c.failed, cancelled=c.cancelled, lost=c.lost + c.in_flight,
                               start_ns=self.start_ns, end_ns=self.end_ns, start_wall_ns=self.start_wall_ns,
                               end_wall_ns=self.end_wall_ns, stopped_reason=stopped_reason,
                               schedule_lag_p50_ns=self.lag_percentile_ns(50),
                               schedule_lag_p99_ns=self.lag_percentile_ns(99))


@dataclass(kw_only=True)
class PodRunTotals:
    """The run: each phase's totals, whether it was cancelled, and why it stopped early (""
    when it did not)."""

    phases: list[PodPhaseTotals]
    cancelled: bool
    stopped_reason: str = ""

    def accounting(self) -> RunAccounting:
        """The run as `ProfileFinished` carries it: one `PhaseAccounting` per phase (by its
        kind, as the timing-manager keys them; a later phase of the same kind replaces an
        earlier one), the early-stop reason on the last."""
        phases = {book.phase: book.accounting(self.stopped_reason if i == len(self.phases) - 1 else "")
                  for i, book in enumerate(self.phases)}
        return RunAccounting(phases=phases, cancelled=self.cancelled, stopped_reason=self.stopped_reason)


class PodCoordinator:
    """Registers pods, cuts each phase of `phases` among them and adds up their reports.

    `run` serves the pods' messages until cancelled (ready at once); `wait_registered` waits
    for `expected_pods`; `start` runs every phase and returns the totals. `clock` (monotonic
    ns), `wall_clock` and `sleep` are the ports of the engine (`aiperf.issuing.ports`). A pod
    silent for `lost_after_s` during a phase is declared lost (checked every `check_every_s`).
    With `events`, each phase publishes what the per-request engine does (`PhaseStarted` once
    the slices are out; `PhaseSendingComplete` and `PhaseComplete` with the pods' totals once
    every pod is final or lost), so the rest of a run cannot tell the two apart."""

    def __init__(self, *, router: PodRouter, phases: Sequence[Phase], seed: int | None, expected_pods: int,
                 registration_timeout_s: float, lost_after_s: float = 10.0, check_every_s: float = 1.0,
                 clock: Clock = time.perf_counter_ns, wall_clock: Clock = time.time_ns,
                 sleep: Sleep = anyio.sleep, events: EventSink | None = None) -> None:
        self._router, self._phases, self._seed = router, list(phases), seed
        self._events = events
        self._expected, self._registration_timeout_s = expected_pods, registration_timeout_s
        self._lost_after_ns, self._check_every_s = round(lost_after_s * 1e9), check_every_s
        self._clock, self._wall_clock, self._sleep = clock, wall_clock, sleep
        self.pods: dict[str, _Pod] = {}
        self.phases: list[PodPhaseTotals] = []
        self.ignored = 0
        self._registered = anyio.Event()
        self._cancel = anyio.Event()
        self._cancel_reason = ""

    # -- messages -------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Take the pods' hellos and reports until cancelled; ready at once."""
        task_status.started()
        while True:
            try:
                peer, message = await self._router.recv()
            except BadMessage as exc:
                log.warning("pods.bad_message", peer=exc.peer, reason=exc.reason)
                continue
            self.take(peer, message)

    def take(self, peer: bytes, message: PodUpstream) -> None:
        """Account for one message of pod `peer` (O(1)): a hello registers it, a report
        updates its phase's counters. Reports of unknown or lost pods, of a phase not running
        or stale ones (`seq` not above the last) are ignored (counted in `ignored`)."""
        pod_id = peer.decode(errors="replace")
        match message:
            case PodHello(workers=workers):
                pod = self.pods.get(pod_id)
                if pod is None:
                    self.pods[pod_id] = _Pod(pod_id, workers, self._clock())
                    if len(self.pods) >= self._expected:
                        self._registered.set()
                else:
                    pod.workers, pod.last_heard_ns = workers, self._clock()
            case PodReport(phase_index=index, seq=seq, counts=counts, final=final):
                pod = self.pods.get(pod_id)
                book = self.phases[index] if 0 <= index < len(self.phases) else None
                if pod is None or pod.lost or book is None or pod_id in book.final \
                        or seq <= book.seq.get(pod_id, -1) or pod_id not in book.per_pod:
                    self.ignored += 1
                    return
                pod.last_heard_ns = self._clock()
                book.seq[pod_id] = seq
                book.reports += 1
                book.take(pod_id, counts)
                if final:
                    book.add_lags(message.lag_counts, message.early_counts, message.lag_max_ns)
                    book.final.add(pod_id)
                    book.settle()

    # -- the run --------------------------------------------------------------------------

    @property
    def live_pods(self) -> list[str]:
        """Registered pods not declared lost, in registration order."""
        return [p.pod_id for p in self.pods.values() if not p.lost]

    async def wait_registered(self) -> int:
        """Wait until `expected_pods` pods said hello; returns how many did. Raises `GiveUp`
        when fewer did within the registration timeout."""
        with anyio.move_on_after(self._registration_timeout_s):
            await self._registered.wait()
        if len(self.pods) < self._expected:
            raise GiveUp(f"only {len(self.pods)} of {self._expected} worker pods registered within "
                         f"{self._registration_timeout_s}s")
        return len(self.pods)

    async def start(self) -> PodRunTotals:
        """Run every phase in turn; stops early when cancelled or no pod is left."""
        reason = ""
        for index in range(len(self._phases)):
            if self._cancel.is_set():
                break
            if not self.live_pods:
                reason = NO_PODS
                break
            await self.run_phase(index)
        if self._cancel.is_set():
            reason = self._cancel_reason or "cancelled"
        return PodRunTotals(phases=list(self.phases), cancelled=self._cancel.is_set(), stopped_reason=reason)

    async def run_phase(self, index: int) -> PodPhaseTotals:
        """Hand every live pod its slice of phase `index` and wait until each sent its final
        report or was declared lost; returns the phase's totals."""
        phase = self._phases[index]
        pods = self.live_pods
        book = PodPhaseTotals(index=index, phase=PhaseTag(phase.role), pods=pods,
                              per_pod=dict.fromkeys(pods, PodCounts()))
        while len(self.phases) <= index:
            self.phases.append(book)
        self.phases[index] = book
        now = book.start_ns = self._clock()
        book.start_wall_ns = self._wall_clock()
        for piece, pod_id in zip(slice_phase(phase, len(pods), seed=self._seed), pods, strict=True):
            self.pods[pod_id].last_heard_ns = now
            try:
                await self._router.send(pod_id.encode(), PodPhaseStart(phase_index=index, phase=book.phase,
                                                                       slice=encode_slice(piece)))
            except PeerUnreachable:
                self._declare_lost(book, pod_id)
        log.info("pods.phase_started", phase=phase.name, pods=len(pods))
        await self._publish(PhaseStarted(phase=book.phase, started_at_ns=book.start_ns,
                                         expected_credits=phase.requests, expected_duration_s=phase.duration,
                                         started_wall_ns=book.start_wall_ns))
        book.settle()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, book)
            tg.start_soon(self._pass_cancel, book)
            await book.done.wait()
            tg.cancel_scope.cancel()
        book.end_ns, book.end_wall_ns = self._clock(), self._wall_clock()
        log.info("pods.phase_complete", phase=phase.name, lost_pods=len(book.lost_pods),
                 **{name: getattr(book.counts, name) for name in FIELDS})
        done = book.accounting()
        await self._publish(PhaseSendingComplete(phase=book.phase, issued=done.issued, at_ns=book.end_ns))
        await self._publish(PhaseComplete(phase=book.phase, issued=done.issued, returned=done.returned,
                                          lost=done.lost, at_ns=book.end_ns))
        return book

    def cancel(self, reason: str) -> None:
        """Stop the run: every live pod is told to cancel (the running phase still ends with
        each pod's final report or its loss) and no later phase starts. Idempotent."""
        if self._cancel.is_set():
            return
        self._cancel_reason = reason
        self._cancel.set()

    async def worker_lost(self, worker_id: str) -> int:
        """Pass a dead worker on to every live pod (`PodWorkerLost`, O(pods), rare): the pod
        that issues to it writes its in-flight credits off, and they reach the totals in that
        pod's counters. Returns how many pods were told."""
        told = 0
        for pod_id in self.live_pods:
            try:
                await self._router.send(pod_id.encode(), PodWorkerLost(worker_id=worker_id))
                told += 1
            except PeerUnreachable:
                log.warning("pods.worker_lost_unreachable", pod=pod_id, worker=worker_id)
        return told

    async def _publish(self, event: Event) -> None:
        if self._events is None:
            return
        try:
            await self._events.publish(event)
        except Exception as exc:  # best effort, as the engine's events
            log.warning("pods.publish_failed", event=type(event).__name__, error=str(exc))

    async def _watch(self, book: PodPhaseTotals) -> None:
        """Every `check_every_s`: declare the pods silent for `lost_after_s` lost (O(pods))."""
        while True:
            await self._sleep(self._check_every_s)
            now = self._clock()
            for pod_id in book.pending:
                if now - self.pods[pod_id].last_heard_ns > self._lost_after_ns:
                    self._declare_lost(book, pod_id)

    async def _pass_cancel(self, book: PodPhaseTotals) -> None:
        """Once the run is cancelled, tell every pod still running the phase."""
        await self._cancel.wait()
        for pod_id in book.pending:
            try:
                await self._router.send(pod_id.encode(), PodCancel(reason=self._cancel_reason))
            except PeerUnreachable:
                self._declare_lost(book, pod_id)

    def _declare_lost(self, book: PodPhaseTotals, pod_id: str) -> None:
        """Pod `pod_id` is gone: its last reported in-flight credits are lost, it gets no more."""
        pod = self.pods[pod_id]
        pod.lost = True
        last = book.per_pod.get(pod_id, PodCounts())
        book.take(pod_id, msgspec.structs.replace(last, lost=last.lost + last.in_flight, in_flight=0))
        book.lost_pods.append(pod_id)
        log.warning("pods.pod_lost", pod=pod_id, phase=str(book.phase), lost=last.in_flight)
        book.settle()


__all__ = ["NO_PODS", "PodCoordinator", "PodPhaseTotals", "PodRouter", "PodRunTotals", "add_counts"]
