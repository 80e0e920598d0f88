"""The worker on fakes at its ports: contract of records and returns, cancellation, schedule,
multi-turn history, handshake and clock offset."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from aiperf.comms import Addressing
from aiperf.messages import (
    CancelCredits,
    Credit,
    CreditReturn,
    Phase,
    ProfileConfigure,
    ProfileStart,
    RequestRecord,
    WorkerLeaving,
)
from aiperf.runtime import GiveUp, UnknownCommand, UserError
from aiperf.runtime.errors import root_cause
from aiperf.worker.clock import TRACK_WINDOW, ClockSample, OffsetTracker, estimate_offset, wait_until
from aiperf.worker.main import credit_endpoints, raw_records_endpoint, request_headers
from aiperf.worker.service import Worker, WorkerSettings
from tests._worker_fakes import FakeCreditLink, endpoint, running_worker

pytestmark = pytest.mark.anyio


def credit(num: int, conversation: str, *, phase: Phase = Phase.PROFILING, turn: int = 0,
           **kw: int | bool) -> Credit:
    return Credit(phase=phase, num=num, conversation_id=conversation, turn_index=turn,
                  issued_at_ns=time.perf_counter_ns(), **kw)


async def test_each_credit_gets_its_record_then_its_return() -> None:
    async with running_worker() as h:
        assert h.hellos[0].worker_id == "w0" and h.hellos[0].group_id == "g0"
        assert h.hellos[0].clock_offset_ns == 0
        for num, conv in enumerate(("ok", "http500", "refused")):
            await h.link.tx.send(credit(num, conv))
        returns = {(r := await h.next_return()).num: r for _ in range(3)}
        records = {(r := await h.next_record()).credit_num: r for _ in range(3)}
        assert returns[0].ok and returns[0].sent and not returns[0].cancelled
        assert not returns[1].ok and returns[1].error == "HTTP 500" and returns[1].sent
        assert not returns[2].ok and returns[2].error == "ConnectionError"
        assert records[0].status == 200 and records[0].error is None
        assert records[0].input_tokens == 2 and records[0].model == "m"
        assert records[0].endpoint == "chat" and records[0].streaming
        assert records[0].credit_received_ns <= records[0].start_ns <= records[0].end_ns
        assert records[0].chunk_ns == sorted(records[0].chunk_ns) and len(records[0].chunks) == 2
        assert len(records[0].x_request_id) == 32
        assert records[1].status == 500 and records[1].error is None  # parsed downstream
        assert records[2].error is not None and records[2].error.type == "ConnectionError"
        # per credit: the record was pushed before the return
        order = [(kind, getattr(m, "num", getattr(m, "credit_num", None))) for kind, m in h.log]
        for num in range(3):
            assert order.index(("record", num)) < order.index(("return", num))
        assert h.worker.in_flight == 0
        posted = h.transport.posted[0]
        assert posted.url == "http://fake:1/v1/chat/completions" and posted.streaming
        assert posted.headers["Content-Type"] == "application/json"
        assert posted.headers["X-Request-ID"] == records[0].x_request_id
        assert posted.body["model"] == "m" and posted.body["max_completion_tokens"] == 4


async def test_a_record_the_processors_cannot_take_yet_waits_is_counted_and_precedes_its_return() -> None:
    async with running_worker(records_buffer=0) as h:
        await h.link.tx.send(credit(0, "ok"))
        await anyio.wait_all_tasks_blocked()  # the request ran; its record waits for a reader
        assert h.worker.in_flight == 1 and h.worker.records_waited == 1
        assert (await h.next_record()).credit_num == 0
        assert (await h.next_return()).num == 0
        await h.link.tx.send(credit(1, "ok"))
        await anyio.wait_all_tasks_blocked()
        assert (await h.next_record()).credit_num == 1 and h.worker.records_waited == 2


async def test_unknown_conversation_fails_the_credit_not_the_worker() -> None:
    async with running_worker() as h:
        await h.link.tx.send(credit(1, "nope"))
        await h.link.tx.send(credit(2, "ok", turn=5))
        await h.link.tx.send(credit(3, "ok"))
        returns = {(r := await h.next_return()).num: r for _ in range(3)}
        assert not returns[1].ok and returns[1].error == "LookupError" and not returns[1].sent
        assert not returns[2].ok and returns[3].ok
        records = {(r := await h.next_record()).credit_num: r for _ in range(3)}
        assert records[1].error is not None and "'nope'" in records[1].error.message


async def test_cancel_after_cancels_the_request_once_sent() -> None:
    async with running_worker() as h:
        await h.link.tx.send(credit(1, "hang", should_cancel=True, cancel_after_ns=20_000_000))
        ret = await h.next_return()
        rec = await h.next_record()
        assert ret.cancelled and ret.sent and not ret.ok and ret.error == "RequestCancellationError"
        assert rec.cancelled and rec.error is not None and rec.error.code == 499
        assert rec.end_ns - rec.start_ns >= 20_000_000


async def test_cancel_after_longer_than_the_timeout_is_a_timeout() -> None:
    async with running_worker(target=endpoint(timeout=0.05)) as h:
        await h.link.tx.send(credit(1, "hang", should_cancel=True, cancel_after_ns=10**12))
        ret = await h.next_return()
        rec = await h.next_record()
        assert not ret.cancelled and ret.error == "RequestTimeout" and ret.sent
        assert rec.error is not None and rec.error.type == "RequestTimeout" and not rec.cancelled


async def test_cancel_credits_cancels_only_that_phase() -> None:
    async with running_worker() as h:
        await h.link.tx.send(credit(1, "hang", phase=Phase.WARMUP))
        await h.link.tx.send(credit(2, "hang"))
        future = time.perf_counter_ns() + 60 * 10**9
        await h.link.tx.send(credit(3, "ok", scheduled_at_ns=future))  # waiting for its time
        with anyio.fail_after(10):
            await h.transport.started.wait()
            while h.worker.in_flight < 3 or len(h.transport.posted) < 2:
                await anyio.sleep(0.001)
        await h.link.tx.send(CancelCredits(phase=Phase.PROFILING, reason="grace period over"))
        returns = {(r := await h.next_return()).num: r for _ in range(2)}
        assert set(returns) == {2, 3}
        assert returns[2].cancelled and returns[2].sent
        assert returns[3].cancelled and not returns[3].sent
        rec = {(r := await h.next_record()).credit_num: r for _ in range(2)}
        assert rec[3].start_ns == 0 and rec[3].cancelled
        assert rec[2].error is not None and "grace period over" in rec[2].error.message
        assert h.worker.in_flight == 1  # the warmup one is still running
        await h.link.tx.send(CancelCredits(phase=Phase.WARMUP))
        assert (await h.next_return()).num == 1


async def test_stopping_returns_in_flight_credits_as_cancelled_then_leaves() -> None:
    async with running_worker() as h:
        await h.link.tx.send(credit(1, "hang"))
        with anyio.fail_after(10):
            await h.transport.started.wait()
        log = h.log
    kinds = [(kind, type(msg).__name__) for kind, msg in log]
    assert kinds == [("record", "RequestRecord"), ("return", "CreditReturn"), ("return", "WorkerLeaving")]
    ret = log[1][1]
    assert isinstance(ret, CreditReturn) and ret.cancelled and ret.sent
    assert isinstance(log[2][1], WorkerLeaving) and log[2][1].worker_id == "w0"
    assert h.dataset.closed


async def test_scheduled_credit_is_not_sent_before_its_time() -> None:
    async with running_worker() as h:
        at = time.perf_counter_ns() + 30_000_000
        await h.link.tx.send(credit(1, "ok", scheduled_at_ns=at))
        assert (await h.next_return()).ok
        rec = await h.next_record()
        assert rec.start_ns >= at and rec.scheduled_ns == at


async def test_wait_until_never_returns_early() -> None:
    for delay_ns in (0, 200_000, 3_000_000, 12_000_000):
        target = time.perf_counter_ns() + delay_ns
        await wait_until(target)
        assert time.perf_counter_ns() >= target


async def test_credits_before_configure_wait_for_it() -> None:
    async with running_worker(configure=False) as h:
        await h.link.tx.send(credit(1, "ok"))
        await anyio.wait_all_tasks_blocked()
        assert h.worker.in_flight == 1 and not h.transport.posted
        await h.worker.handle(ProfileConfigure(request_id="c", dataset_dir="/x"))
        assert (await h.next_return()).ok


async def test_multi_turn_chat_sends_the_history_and_forgets_it_after_the_last_turn() -> None:
    async with running_worker() as h:
        for turn in range(3):
            await h.link.tx.send(credit(turn, "multi", turn=turn))
            assert (await h.next_return()).ok
        bodies = [p.body["messages"] for p in h.transport.posted]
        assert bodies[0] == [{"role": "user", "content": "ok"}]
        assert bodies[1] == [{"role": "user", "content": "ok"},
                             {"role": "assistant", "content": "hello"},
                             {"role": "user", "content": "again"}]
        assert bodies[2][-3:] == [{"role": "user", "content": "again"},
                                  {"role": "assistant", "content": "hello"},
                                  {"role": "user", "content": "last"}]
        assert h.worker._history == {}


async def test_configure_and_commands() -> None:
    async with running_worker() as h:
        with pytest.raises(UnknownCommand, match="does not handle ProfileStart"):
            await h.worker.handle(ProfileStart(request_id="s"))
        with pytest.raises(GiveUp, match="dataset_dir"):
            await h.worker.handle(ProfileConfigure(request_id="c", dataset_dir=""))


async def test_unreadable_dataset_is_a_user_error(tmp_path: Path) -> None:
    async def probe(hello: object) -> bool:
        return True

    link = FakeCreditLink()
    try:
        worker = Worker(settings=WorkerSettings(worker_id="w"), endpoint=endpoint(), model="m", credits=link,
                        returns=None, records=None, transport=None, probe=probe)
        with pytest.raises(UserError, match="cannot open dataset file"):
            await worker.handle(ProfileConfigure(request_id="c", dataset_dir=str(tmp_path)))
    finally:
        link.close()


async def test_handshake_gives_up_when_nobody_answers() -> None:
    link = FakeCreditLink(answer_pings=False)
    settings = WorkerSettings(worker_id="w0", handshake_timeout_s=0.2, ping_interval_s=0.05)
    with pytest.raises(ExceptionGroup) as info:
        async with running_worker(settings=settings, link=link):
            await anyio.sleep_forever()
    cause = root_cause(info.value)
    assert isinstance(cause, GiveUp) and "did not answer TimePing" in str(cause)
    assert len(link.pings) >= 2 and [p.seq for p in link.pings] == sorted({p.seq for p in link.pings})


async def test_clock_offset_is_measured_in_kubernetes_mode() -> None:
    link = FakeCreditLink(offset_ns=5_000_000_000)
    settings = WorkerSettings(worker_id="w0", measure_clock_offset=True)
    async with running_worker(settings=settings, link=link) as h:
        assert len(link.pings) == 20
        assert abs(h.hellos[0].clock_offset_ns - 5_000_000_000) < 50_000_000
        assert h.worker.clock_offset_ns == h.hellos[0].clock_offset_ns
        # a scheduled time on the manager's clock is waited for on the local clock
        at_remote = time.perf_counter_ns() - link.offset_ns + 20_000_000
        await h.link.tx.send(credit(1, "ok", scheduled_at_ns=at_remote))
        rec: RequestRecord = await h.next_record()
        assert rec.start_ns >= at_remote + h.worker.clock_offset_ns
        assert rec.clock_offset_ns == h.worker.clock_offset_ns


def test_estimate_offset_min_filter() -> None:
    # local = remote + 1000; transits of 100/300/500 out, 100 back
    samples = [ClockSample(sent_ns=t, remote_ns=t - 1000 + out, received_ns=t + out + 100)
               for t, out in ((5000, 300), (9000, 100), (12000, 500))]
    assert estimate_offset(samples) == 1000
    with pytest.raises(ValueError):
        estimate_offset([])


def test_request_headers_from_env() -> None:
    assert request_headers({}) == {}
    assert request_headers({"AIPERF_API_KEY": "k"}) == {"Authorization": "Bearer k"}
    assert request_headers({"AIPERF_API_KEY": "k", "AIPERF_HEADERS_JSON": '{"X-A": "1", "Authorization": "x"}'}) \
        == {"Authorization": "x", "X-A": "1"}
    for bad in ("{", "[1]", '{"a": 1}'):
        with pytest.raises(UserError, match="AIPERF_HEADERS_JSON"):
            request_headers({"AIPERF_HEADERS_JSON": bad})


def test_raw_records_endpoint_names_group_and_index() -> None:
    assert raw_records_endpoint(Addressing(ipc_dir="/tmp/x"), "g0", 1) == "ipc:///tmp/x/raw_records-g0-1.ipc"


def test_credit_endpoints_are_the_controllers_or_with_per_pod_issuing_the_pods_own() -> None:
    from aiperf.config import Benchmark, CommsOptions, RunConfig, Runtime

    tcp = Addressing(ipc_dir="/tmp/x", controller_host="ctrl")  # a worker pod in Kubernetes
    central = RunConfig(run_id="w", comms=CommsOptions(ipc_dir="/tmp/x"), benchmark=Benchmark(models=["m"]))
    assert credit_endpoints(central, tcp, "g3") == ("tcp://ctrl:5564", "tcp://ctrl:5565")
    assert credit_endpoints(central, Addressing(ipc_dir="/tmp/x"), "g0") == (
        "ipc:///tmp/x/credits.ipc", "ipc:///tmp/x/credit_returns.ipc")
    per_pod = RunConfig(run_id="w", comms=CommsOptions(ipc_dir="/tmp/x"), benchmark=Benchmark(models=["m"], runtime=Runtime(issuing="per_pod")))
    assert credit_endpoints(per_pod, tcp, "g3") == (
        "ipc:///tmp/x/credits-pod-g3.ipc", "ipc:///tmp/x/credit_returns-pod-g3.ipc")  # never TCP: its own pod


async def test_an_audit_is_answered_with_the_credits_held_in_order_after_the_returns() -> None:
    from aiperf.messages import CreditAudit, HeldCredits

    async with running_worker() as h:
        await h.link.tx.send(credit(1, "hang"))
        await h.link.tx.send(credit(2, "ok"))
        assert (await h.next_return()).num == 2
        await h.link.tx.send(CreditAudit(seq=7))
        with anyio.fail_after(10):
            answer = await h.returns.rx.receive()
        assert answer == HeldCredits(worker_id="w0", seq=7, held={Phase.PROFILING: [1]})


async def test_the_clock_offset_follows_a_skew_injected_mid_run() -> None:
    link = FakeCreditLink(offset_ns=5_000_000_000)
    settings = WorkerSettings(worker_id="w0", measure_clock_offset=True)
    async with running_worker(settings=settings, link=link) as h:
        start = h.worker.clock_offset_ns
        stepped = link.offset_ns + 3_000_000  # the manager's node steps its clock 3 ms back
        for num in range(TRACK_WINDOW):  # credits stamped on the stepped clock flush the old delays
            issued = time.perf_counter_ns() - stepped
            await h.link.tx.send(Credit(phase=Phase.PROFILING, num=num, conversation_id="ok", turn_index=0,
                                        issued_at_ns=issued))
            await h.next_return()
        assert abs(h.worker.clock_offset_ns - stepped) < 1_000_000, (start, h.worker.clock_offset_ns, stepped)
        assert abs(start - link.offset_ns) < 1_000_000


def test_offset_tracker_min_filter_over_a_sliding_window() -> None:
    tracker = OffsetTracker(offset_ns=1000, min_rtt_ns=200, window=3)
    assert tracker.offset_ns == 1000
    # local = remote + 1000, transits 100 (the fastest), 400, 900
    assert [tracker.observe(t, t + 1000 + transit) for t, transit in ((0, 400), (10, 100), (20, 900))] == \
        [1300, 1000, 1000]
    # the remote clock steps: local = remote + 5000; after 3 credits the old delays are gone
    assert [tracker.observe(t, t + 5000 + 100) for t in (30, 40, 50)][-1] == 5000
