"""The records-manager aggregates, streams the jsonl, writes the exports and checks the
accounting."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from aiperf.config import Artifacts, Benchmark
from aiperf.messages import (
    LAG_BUCKETS,
    ClientLoad,
    ErrorDetails,
    Finalize,
    Finalized,
    MetricRecord,
    MetricRecordBatch,
    Phase,
    PhaseAccounting,
    ProfileConfigure,
    Progress,
    RunAccounting,
    lag_bucket,
)
from aiperf.metrics import OslMismatchThresholds
from aiperf.records_manager.accounting import accounting_line, balance_problems, missing_records
from aiperf.records_manager.service import RecordsManager

pytestmark = pytest.mark.anyio


class Records:
    def __init__(self) -> None:
        self.tx, self.rx = anyio.create_memory_object_stream[MetricRecordBatch](100)

    async def recv(self) -> MetricRecordBatch:
        return await self.rx.receive()


def record(n: int, *, phase: Phase = Phase.PROFILING, error: bool = False) -> MetricRecord:
    return MetricRecord(
        phase=phase, credit_num=n, worker_id="w", conversation_id="c", start_wall_ns=1_000_000_000 + n,
        end_wall_ns=2_000_000_000 + n,
        metrics={} if error else {"time_to_first_token": 40e6 + n, "output_sequence_length": 64.0,
                                  "input_sequence_length": 10.0, "request_latency": 500e6},
        error=ErrorDetails(type="Internal Server Error", message="boom", code=500) if error else None)


def accounting(issued: int, ok: int, failed: int) -> RunAccounting:
    return RunAccounting(phases={Phase.PROFILING: PhaseAccounting(
        issued=issued, returned=issued, ok=ok, failed=failed, start_ns=0, end_ns=10**9)})


async def run_finalize(tmp_path: Path, records: list[MetricRecord], acct: RunAccounting,
                       records_timeout_s: float = 10.0,
                       osl_mismatch: OslMismatchThresholds | None = None,
                       identify: Callable[[], dict[str, Any]] | None = None,
                       benchmark: Benchmark | None = None) -> Finalized:
    source = Records()
    rm = RecordsManager(benchmark=benchmark or Benchmark(models=["m"]), run_id="r", t0_wall_ns=0, records=source,
                        events=None, artifact_dir=tmp_path, osl_mismatch=osl_mismatch, identify=identify)
    async with anyio.create_task_group() as tg:
        await tg.start(rm.run)
        await rm.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))

        async def feed() -> None:  # records arrive after finalize started waiting, in batches of 1-3
            for i in range(0, len(records), 3):
                await source.tx.send(MetricRecordBatch(records=records[i:i + 3]))

        tg.start_soon(feed)
        result = await rm.handle(Finalize(request_id="f", accounting=acct, records_timeout_s=records_timeout_s))
        tg.cancel_scope.cancel()
    assert isinstance(result, Finalized)
    source.tx.close()
    source.rx.close()
    return result


async def test_finalize_waits_for_every_record_and_writes_exports(tmp_path: Path) -> None:
    records = [record(i) for i in range(9)] + [record(9, error=True)]
    result = await run_finalize(tmp_path, records, accounting(10, 9, 1))
    assert result.balanced and result.request_count == 9 and result.error_request_count == 1
    summary = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert summary["request_count"]["avg"] == 9
    assert summary["aiperf_extensions"]["accounting_balanced"] is True
    assert len((tmp_path / "profile_export.jsonl").read_text().splitlines()) == 10
    assert (tmp_path / "profile_export_aiperf.csv").read_text().startswith("Metric")
    assert "Time to First Token" in result.table
    assert (tmp_path / "profile_export_console.txt").read_text() == result.table
    assert result.files == ["profile_export_aiperf.json", "profile_export_aiperf.csv", "profile_export.jsonl",
                            "profile_export_console.txt"]
    exported = summary["aiperf_extensions"]["accounting"]["profiling"]
    assert exported == msgspec.to_builtins(accounting(10, 9, 1).phases[Phase.PROFILING])


async def test_a_slice_duration_writes_the_time_sliced_exports(tmp_path: Path) -> None:
    records = [record(i) for i in range(6)]
    benchmark = Benchmark(models=["m"], artifacts=Artifacts(slice_duration=0.5))
    result = await run_finalize(tmp_path, records, accounting(6, 6, 0), benchmark=benchmark)
    assert result.files[-2:] == ["profile_export_aiperf_timeslices.json", "profile_export_aiperf_timeslices.csv"]
    doc = json.loads((tmp_path / "profile_export_aiperf_timeslices.json").read_text())
    assert [ts["request_count"]["avg"] for ts in doc["timeslices"]] == [6]
    assert doc["input_config"]["artifacts"]["slice_duration"] == 0.5


async def test_a_response_without_valid_content_is_failed_in_the_accounting_as_in_the_metrics(
        tmp_path: Path) -> None:
    """The worker returned all 10 credits as ok; two responses had no content (the
    record-processor's error): one accounting says ok 8 + failed 2, the metrics' error count too."""
    empty = ErrorDetails(type="InvalidInferenceResultError", message="No responses with actual content")
    records = [record(i) for i in range(8)] + [
        msgspec.structs.replace(record(i, error=True), error=empty, response_error=True) for i in (8, 9)]
    result = await run_finalize(tmp_path, records, accounting(10, 10, 0))
    assert result.balanced, result.problems
    assert result.error_request_count == 2 and result.request_count == 8
    assert result.accounting is not None
    counts = result.accounting.phases[Phase.PROFILING]
    assert (counts.ok, counts.failed) == (8, 2)
    assert result.accounting_line == ("profiling: issued 10 = ok 8 + failed 2 + cancelled 0 "
                                      "(of the failed, 2 answered without valid content)")
    exported = json.loads((tmp_path / "profile_export_aiperf.json").read_text())["aiperf_extensions"]
    assert exported["accounting"]["profiling"]["ok"] == 8 and exported["accounting"]["profiling"]["failed"] == 2


async def test_the_servers_identity_is_exported_and_a_failing_probe_costs_nothing(tmp_path: Path) -> None:
    asked = threading.Event()

    def identify() -> dict[str, Any]:
        asked.set()
        return {"server": "llama.cpp", "version": "b1"}

    await run_finalize(tmp_path / "a", [record(0)], accounting(1, 1, 0), identify=identify)
    exported = json.loads((tmp_path / "a" / "profile_export_aiperf.json").read_text())["aiperf_extensions"]
    assert asked.is_set() and exported["server"] == {"server": "llama.cpp", "version": "b1"}

    def broken() -> dict[str, Any]:
        raise RuntimeError("a bug in the probe")

    result = await run_finalize(tmp_path / "b", [record(0)], accounting(1, 1, 0), identify=broken)
    assert result.balanced
    exported = json.loads((tmp_path / "b" / "profile_export_aiperf.json").read_text())["aiperf_extensions"]
    assert exported["server"] is None


async def test_each_record_of_a_batch_counts_in_order_in_progress_and_jsonl(tmp_path: Path) -> None:
    class Events:
        def __init__(self) -> None:
            self.progress: list[Progress] = []
            self.seen = anyio.Event()

        async def publish(self, event: object) -> None:
            assert isinstance(event, Progress)
            self.progress.append(event)
            if event.completed == 7:
                self.seen.set()

    source, events = Records(), Events()
    rm = RecordsManager(benchmark=Benchmark(models=["m"]), run_id="r", t0_wall_ns=0, records=source,
                        events=events, artifact_dir=tmp_path, progress_interval_s=0.01)
    async with anyio.create_task_group() as tg:
        await tg.start(rm.run)
        await rm.handle(ProfileConfigure(request_id="c", dataset_dir="/d"))
        numbered = [msgspec.structs.replace(record(n, phase=Phase.WARMUP if n == 0 else Phase.PROFILING,
                                                   error=n == 4), metadata={"n": n}) for n in range(8)]
        await source.tx.send(MetricRecordBatch(records=numbered[:2]))
        await source.tx.send(MetricRecordBatch(records=numbered[2:]))
        with anyio.fail_after(10):
            await events.seen.wait()
        result = await rm.handle(Finalize(request_id="f", accounting=RunAccounting(phases={
            Phase.WARMUP: PhaseAccounting(issued=1, returned=1, ok=1),
            Phase.PROFILING: PhaseAccounting(issued=7, returned=7, ok=6, failed=1)})))
        tg.cancel_scope.cancel()
    source.tx.close()
    source.rx.close()
    assert events.progress[-1] == Progress(phase=Phase.PROFILING, completed=7, errors=1)
    assert isinstance(result, Finalized) and result.balanced, result.problems
    lines = (tmp_path / "profile_export.jsonl").read_text().splitlines()
    assert [json.loads(line)["metadata"]["n"] for line in lines] == list(range(8))


@pytest.mark.parametrize(("limits", "expected"), [
    (OslMismatchThresholds(), 2),  # allowed: min(5% of 100, 50) = 5 tokens; 6 and 10 off miss
    (OslMismatchThresholds(pct=8.0), 1),  # 8 tokens: only 10 off misses
    (OslMismatchThresholds(pct=50.0, max_tokens=5), 2),  # the token cap wins over 50 tokens
])
async def test_osl_mismatch_count_follows_the_configured_thresholds(
        tmp_path: Path, limits: OslMismatchThresholds, expected: int) -> None:
    records = []
    for n, osl in enumerate((100.0, 95.0, 94.0, 110.0)):
        r = record(n)
        records.append(msgspec.structs.replace(r, metrics={**r.metrics, "output_sequence_length": osl,
                                                           "requested_osl": 100.0}))
    await run_finalize(tmp_path, records, accounting(4, 4, 0), osl_mismatch=limits)
    summary = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert summary["osl_mismatch_count"] == {"unit": "requests", "avg": expected}


async def test_missing_records_fail_the_balance(tmp_path: Path) -> None:
    result = await run_finalize(tmp_path, [record(i) for i in range(3)], accounting(4, 4, 0),
                                records_timeout_s=0.5)
    assert not result.balanced
    assert "profiling: 3 records for 4 returned credits" in result.problems


BALANCED = {Phase.PROFILING: PhaseAccounting(issued=10, returned=8, ok=6, failed=1, cancelled=1, lost=2)}


def test_balance_rules_and_line() -> None:
    assert balance_problems(BALANCED, {Phase.PROFILING: 8}) == []
    assert balance_problems(BALANCED, {Phase.PROFILING: 7}) == ["profiling: 7 records for 8 returned credits (+ 2 lost)"]
    bad = {Phase.PROFILING: PhaseAccounting(issued=10, returned=10, ok=6, failed=1, cancelled=1)}
    assert "issued 10 != ok+failed+cancelled+lost 8" in balance_problems(bad, {Phase.PROFILING: 10})[0]
    assert accounting_line(BALANCED) == ("profiling: issued 10 = ok 6 + failed 3 + cancelled 1 "
                                         "(of the failed, 2 lost with their worker)")


@pytest.mark.parametrize("field", ["issued", "returned", "ok", "failed", "cancelled", "lost"])
def test_every_counter_of_the_accounting_takes_part_in_the_balance(field: str) -> None:
    counts = BALANCED[Phase.PROFILING]
    off_by_one = msgspec.structs.replace(counts, **{field: getattr(counts, field) + 1})
    assert balance_problems({Phase.PROFILING: off_by_one}, {Phase.PROFILING: off_by_one.returned}) != []


def test_the_accounting_struct_has_exactly_the_documented_fields() -> None:
    assert PhaseAccounting.__struct_fields__ == (
        "issued", "returned", "sent", "ok", "failed", "cancelled", "lost", "start_ns", "end_ns",
        "start_wall_ns", "end_wall_ns", "schedule_lag_p50_ns", "schedule_lag_p99_ns", "stopped_reason")
    assert RunAccounting.__struct_fields__ == ("phases", "cancelled", "stopped_reason")


def test_records_lost_with_a_pod_are_reported_not_unbalanced() -> None:
    assert balance_problems(BALANCED, {Phase.PROFILING: 5}, records_may_be_lost=True) == []
    assert missing_records(BALANCED, {Phase.PROFILING: 5}) == {Phase.PROFILING: 3}
    assert balance_problems(BALANCED, {Phase.PROFILING: 10}, records_may_be_lost=True) == []  # 2 lost
    assert balance_problems(BALANCED, {Phase.PROFILING: 11}, records_may_be_lost=True) == [
        "profiling: 11 records for 8 returned credits (+ 2 lost)"]


async def test_client_saturation_from_the_latest_load_of_each_worker(tmp_path: Path) -> None:
    def load(ticks: int, lag_ms: int, cpu: float) -> ClientLoad:
        counts = [0] * LAG_BUCKETS
        counts[lag_bucket(lag_ms * 1_000_000)] = ticks
        return ClientLoad(interval_ns=10**7, ticks=ticks, lag_counts=counts, lag_max_ns=lag_ms * 1_000_000,
                          busy_wall_ns=ticks * 10**7, busy_cpu_ns=round(cpu * ticks * 10**7), cpu_max_window=cpu)

    loads = {0: load(50, 1, 0.2), 1: load(200, 40, 0.99), 2: load(100, 2, 0.3)}  # 1 is the latest
    records = [msgspec.structs.replace(record(i), worker_id="worker-a", client_load=loads.get(i)) for i in range(4)]
    result = await run_finalize(tmp_path, records, accounting(4, 4, 0))
    verdict = json.loads((tmp_path / "profile_export_aiperf.json").read_text())["aiperf_extensions"]["client_saturation"]
    assert verdict["saturated"] is True and list(verdict["workers"]) == ["worker-a"]
    assert verdict["workers"]["worker-a"]["ticks"] == 200 and verdict["workers"]["worker-a"]["cpu_max_window"] == 0.99
    assert "CLIENT SATURATED" in result.overhead_line and "worker-a: event-loop lag p99" in result.overhead_line
